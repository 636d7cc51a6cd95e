// Which keys a query may attend to: the one mask definition shared by the CPU
// attention, the CUDA attention kernels and the FLOP counter.
//
// Keys and values live in a KV store of B sequences x S slots. Every slot has
// metadata (order, depth, valid); a query is the row that wrote one slot, so it
// carries the metadata of that slot. Query slot q may see key slot k of the
// same sequence iff
//     valid[k]  and  order[k] <= order[q]  and  the rule's condition on depth:
//       AnyDepth: none;   DepthLE: depth[k] <= depth[q];
//       OwnGroup: depth[k] < 0 or depth[k] == depth[q]
//     and, for a private key (valid[k] == 2), k == q: the key is visible to the
//     query of its own slot only (TaH2's lookahead rows, whose keys no other
//     query may see; model.h writes them for a PassPlan with private_keys).
// This covers every pattern the methods need (DESIGN / methods.md 0.3):
//   causal (standard, looped, ponder: one store per pass, order = position),
//   interleaved (pause, CYB: order = index in the flattened sequence),
//   duo-causal (TaH2, latent CoT: one store for all depths, slot = t*M + m,
//               order = t, depth = m, rule DepthLE, valid = executed),
//   own-group (CYB's consistent variant: rule OwnGroup, depth holds a group
//               id: -1 for slots every later query may see (real tokens),
//               g >= 0 for slots only queries of group g may see (the pauses
//               of token g are visible inside token g's window only)).
// Within a sequence, slots must be laid out with nondecreasing order, so the
// keys a query can see lie in a prefix of its sequence's slots.
#pragma once
#include "core/common.h"

namespace ada {

enum DepthRule : int { kAnyDepth = 0, kDepthLE = 1, kOwnGroup = 2 };

struct KeyMeta {
  const int* order;  // (B*S)
  const int* depth;  // (B*S)
  const int* valid;  // (B*S) 0 = empty, 1 = slot holds a computed key/value, 2 = the same, private
  int S;             // slots per sequence
  int rule;          // DepthRule

  // qslot and kslot are global slot indices (b*S + s) of the same sequence b.
  HD bool visible(int qslot, int kslot) const {
    if (!valid[kslot]) return false;
    if (valid[kslot] == 2 && kslot != qslot) return false;  // private: its own query only
    if (order[kslot] > order[qslot]) return false;
    if (rule == kDepthLE && depth[kslot] > depth[qslot]) return false;
    if (rule == kOwnGroup && depth[kslot] >= 0 && depth[kslot] != depth[qslot]) return false;
    return true;
  }
};

// Sizes of one attention call.
struct AttnDims {
  int N;    // query rows
  int B;    // sequences in the store
  int S;    // slots per sequence
  int H;    // heads
  int hs;   // head size
  int ldq;       // row stride of q
  int lddq = 0;  // row stride of dq (attention backward); 0: the same as q's
  HD int dq_ld() const { return lddq ? lddq : ldq; }
};

}  // namespace ada
