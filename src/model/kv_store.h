// The keys and values a backbone pass attends to: per layer K, V (B*S, D)
// plus per-slot metadata (order, depth, valid) that defines the mask (see
// ops/attention_mask.h). A pass writes the K/V of its own rows into their
// slots and its queries attend to every visible slot, so the same mechanism
// gives causal attention, one cache per pass (PonderLM), interleaved pause
// positions, and the 2-D (position, depth) grid of TaH2 / latent CoT.
//
// dK, dV collect the gradient arriving at every slot from every query that
// saw it (from this pass and from later passes), and the backward of the pass
// that wrote a slot reads it from there. For generation the store simply lives
// across decoding steps: it is the KV cache.
#pragma once
#include <vector>

#include "backend/arena.h"
#include "ops/attention_mask.h"

namespace ada {

template <class Bk>
class KvStore {
 public:
  using T = typename Bk::Real;
  int B = 0, S = 0, L = 0, D = 0;
  int rule = kAnyDepth;
  std::vector<int> order, depth, valid;  // host metadata (B*S); valid 0, 1, or 2 = private (attention_mask.h)
  int *d_order = nullptr, *d_depth = nullptr, *d_valid = nullptr;
  std::vector<T*> K, V, dK, dV;  // per layer, (B*S, D) each

  // Allocates from `arena`. Defaults: order[b*S + s] = s, depth 0, nothing valid.
  void init(Bk& be, Arena<Bk>& arena, int B_, int S_, int L_, int D_, int rule_, bool with_grads) {
    B = B_, S = S_, L = L_, D = D_, rule = rule_;
    const size_t slots = (size_t)B * S;
    order.assign(slots, 0);
    depth.assign(slots, 0);
    valid.assign(slots, 0);
    for (size_t i = 0; i < slots; i++) order[i] = (int)(i % S);
    d_order = arena.template alloc<int>(slots);
    d_depth = arena.template alloc<int>(slots);
    d_valid = arena.template alloc<int>(slots);
    K.assign(L, nullptr), V.assign(L, nullptr), dK.assign(L, nullptr), dV.assign(L, nullptr);
    for (int l = 0; l < L; l++) {
      K[l] = arena.template zeros<T>(slots * D);
      V[l] = arena.template zeros<T>(slots * D);
      if (with_grads) {
        dK[l] = arena.template zeros<T>(slots * D);
        dV[l] = arena.template zeros<T>(slots * D);
      }
    }
    upload_meta(be);
  }

  void upload_meta(Bk& be) {
    const size_t slots = (size_t)B * S;
    be.to_device(d_order, order.data(), slots);
    be.to_device(d_depth, depth.data(), slots);
    be.to_device(d_valid, valid.data(), slots);
  }

  KeyMeta meta() const { return KeyMeta{d_order, d_depth, d_valid, S, rule}; }
  KeyMeta host_meta() const { return KeyMeta{order.data(), depth.data(), valid.data(), S, rule}; }

  // Keys visible to the query in `qslot` (host metadata).
  long long visible_keys(int qslot) const {
    const KeyMeta km = host_meta();
    const int b = qslot / S;
    long long n = 0;
    for (int s = 0; s < S; s++) n += km.visible(qslot, b * S + s);
    return n;
  }

  // Sum of visible_keys over a list of query slots (the attention FLOPs of a
  // pass), in O(S * depths + n log S) with prefix counts instead of O(n S):
  // within a sequence slots have nondecreasing order, so the keys a query may
  // see are the valid slots of a prefix, filtered by depth for DepthLE.
  long long total_visible_keys(const std::vector<int>& qslots) const {
    long long total = 0;
    if (rule == kOwnGroup) {  // rare and short (CYB's windows): count directly
      for (int q : qslots) total += visible_keys(q);
      return total;
    }
    int max_depth = 0;
    if (rule == kDepthLE)
      for (int d : depth) max_depth = d > max_depth ? d : max_depth;
    const int nd = max_depth + 1;
    std::vector<long long> pre;  // pre[d * (S+1) + k] = valid slots s < k with depth <= d
    int cur_b = -1;
    for (int q : qslots) {
      const int b = q / S;
      if (b != cur_b) {
        cur_b = b;
        pre.assign((size_t)nd * (S + 1), 0);
        for (int d = 0; d < nd; d++)
          for (int k = 0; k < S; k++) {
            const int sl = b * S + k;
            const bool ok = valid[sl] == 1 && (rule != kDepthLE || depth[sl] <= d);  // private keys: below
            pre[(size_t)d * (S + 1) + k + 1] = pre[(size_t)d * (S + 1) + k] + ok;
          }
      }
      // first slot of sequence b whose order exceeds the query's
      int lo = 0, hi = S;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (order[b * S + mid] <= order[q]) lo = mid + 1; else hi = mid;
      }
      total += pre[(size_t)(rule == kDepthLE ? depth[q] : 0) * (S + 1) + lo];
      total += valid[q] == 2;  // a private key is seen by its own query only
    }
    return total;
  }
};

// KV reuse (AdaPonderLM): store `to` takes, at `slots`, the keys and values
// that `from` holds there, in every layer, and marks them valid. A halted
// token is thereby seen by later passes through its last executed keys.
template <class Bk>
void kv_copy_slots(Bk& be, Arena<Bk>& arena, const KvStore<Bk>& from, KvStore<Bk>& to, const std::vector<int>& slots) {
  const int n = (int)slots.size(), D = to.D;
  if (n == 0) return;
  int* d_slots = arena.template alloc<int>(n);
  be.to_device(d_slots, slots.data(), n);
  auto* tmp = arena.template alloc<typename Bk::Real>((size_t)n * D);
  for (int l = 0; l < to.L; l++) {
    be.gather_rows(tmp, D, from.K[l], D, d_slots, n, D);
    be.scatter_rows(to.K[l], D, tmp, D, d_slots, n, D);
    be.gather_rows(tmp, D, from.V[l], D, d_slots, n, D);
    be.scatter_rows(to.V[l], D, tmp, D, d_slots, n, D);
  }
  for (int s : slots) to.valid[s] = 1;
  to.upload_meta(be);
}

// Its backward: the gradient that reached the copies flows back to the pass
// that produced them, from.dK[slots] += to.dK[slots] (and dV). Call it after
// the backward of the pass that used `to`, before the one that wrote `from`.
template <class Bk>
void kv_copy_slots_backward(Bk& be, Arena<Bk>& arena, KvStore<Bk>& from, const KvStore<Bk>& to,
                            const std::vector<int>& slots) {
  const int n = (int)slots.size(), D = to.D;
  if (n == 0) return;
  int* d_slots = arena.template alloc<int>(n);
  be.to_device(d_slots, slots.data(), n);
  auto* tmp = arena.template alloc<typename Bk::Real>((size_t)n * D);
  for (int l = 0; l < to.L; l++) {
    be.gather_rows(tmp, D, to.dK[l], D, d_slots, n, D);
    be.scatter_add_rows(from.dK[l], D, tmp, D, d_slots, n, D);
    be.gather_rows(tmp, D, to.dV[l], D, d_slots, n, D);
    be.scatter_add_rows(from.dV[l], D, tmp, D, d_slots, n, D);
  }
}

}  // namespace ada
