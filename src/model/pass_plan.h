// Which rows one backbone pass computes (host side). A method builds a plan
// per pass: every row is one (token, pass) that is still active, it writes
// its key/value into one slot of the pass's KV store, and carries a rotary
// position. Rows are grouped by sequence with increasing slots, which the
// attention relies on.
//   slot   (N)    global KV slot b*S + s written by the row
//   pos    (N)    rotary position
//   qstart (B+1)  rows of sequence b are [qstart[b], qstart[b+1])
#pragma once
#include <vector>

#include "core/common.h"

namespace ada {

struct PassPlan {
  int B = 0;  // sequences
  int S = 0;  // slots per sequence in the store the plan writes to
  std::vector<int> slot, pos, qstart;
  // Rows (indices into this plan) that write their K/V into their slot; empty
  // means every row does. A row that does not write still queries: its slot
  // must already hold a valid key (AdaPonderLM's masked reference mode, where
  // a halted token's row is computed but the keys others see are reused).
  std::vector<int> kv_rows;
  // The rows' keys are private: marked valid = 2 in the store, each is seen
  // by its own row's query only, never by another row of this or a later
  // pass (TaH2's lookahead rows: they see the executed keys, nobody sees
  // them). The method clears those slots (valid = 0) once the pass is done.
  bool private_keys = false;

  int n() const { return (int)slot.size(); }

  // Builds qstart from slots and checks the grouping invariant.
  void finish() {
    qstart.assign(B + 1, 0);
    check(pos.size() == slot.size(), "pass plan: pos and slot differ in length");
    for (int i = 0; i < n(); i++) {
      const int b = slot[i] / S;
      check(b >= 0 && b < B, "pass plan: slot out of range");
      check(i == 0 || slot[i] > slot[i - 1], "pass plan: rows must have increasing slots");
      qstart[b + 1]++;
    }
    for (int b = 0; b < B; b++) qstart[b + 1] += qstart[b];
  }

  // The plain case: all B*T tokens, token (b, t) writes slot b*S + t at position t.
  static PassPlan dense(int B, int T, int S) {
    PassPlan p;
    p.B = B;
    p.S = S;
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) {
        p.slot.push_back(b * S + t);
        p.pos.push_back(t);
      }
    p.finish();
    return p;
  }
};

}  // namespace ada
