// The synthetic task of docs/tasks.md: variable chains whose answers need a
// known number of sequential lookups. One program is one line of ASCII text,
// one character per token (the byte tokenizer: ids are the bytes):
//
//   [e=h][u=3][h=u][b=e][r=8][k=1]H3R8E3U3K1B3\n  (grammar "fused": [..] is one token)
//   e=h;u=3;h=u;b=e;r=8;k=1?h=3?r=8?e=3?u=3?k=1?b=3\n  (grammar "equals")
//   eh;u3;hu;be;r8;k1?h3?r8?e3?u3?k1?b3\n        (grammar "compact")
//
// `assignments` assignments "v=d" (a root: a digit) or "v=u" (a copy of an
// earlier or later variable) in a random order, forming `chains` chains;
// then `queries` queries "?v=d", each asking a different variable, in a
// random order, answered by the root digit of its chain. (The "compact"
// grammar drops the '='; the "fused" one writes an assignment as one token
// and a query "?v=" as one token.) A query's class is
// hop<k>, k the fewest lookups that find its answer in the text before it: a
// lookup reads one assignment "x=..", followed from either side, or an
// earlier query's answer "?x=d" -- so k = 1 + the distance along the chain to
// the nearest variable whose digit is already shown (its root, or a variable
// answered before). Every line has the same number of tokens,
// so windows of a multiple of that length hold whole programs.
//
// The class of every token (what predicting it takes, given what precedes):
//   format  ';', '?', '=', '\n' (fused: '\n' only): fixed by the grammar and the place in the line
//   name    a variable name (fused: a link token, a query token): the
//           generator's random choice of names, links and query order
//   value   a root's digit (fused: a root's token): uniform over 0-9, irreducibly random
//   hop<k>  a query's answer, k lookups away (k = 1 .. assignments - chains + 1)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"

namespace ada {

// The "fused" grammar writes each assignment as ONE token, a byte above
// the ASCII range, so that a lookup is one attention step (the query's name
// matches the assignment token, whose value is in the same token): root v=d
// is kFusedRoot + 10 v + d, link v=u is kFusedLink + kFusedMaxLetters v + u,
// v and u letter indices (0 = a) below kFusedMaxLetters. A query is the
// upper-case name ('A' + v), its answer the digit; a line ends with '\n'.
constexpr int kFusedMaxLetters = 7;
constexpr int kFusedRoot = 128;                             // 128 .. 197
constexpr int kFusedLink = kFusedRoot + 10 * kFusedMaxLetters;  // 198 .. 246

struct ChainTaskOptions {
  int assignments = 6;  // M: assignments per program (distinct variables)
  int chains = 2;       // R: chains per program (roots), each of at least one assignment
  int queries = 6;      // Q: variables asked per program (distinct; at most M)
  int letters = 6;      // N: names are drawn from the first N letters a, b, ... (M <= N)
  // "fused" (the default): one token per assignment, "A" + digit per query
  // (above). "equals": "v=d;" and "?v=d", one character per token, the first
  // version. "compact": "vd;" and "?vd". docs/tasks.md has what each learned.
  std::string grammar = "fused";
  // How the M assignments are split into the R chains. "random": a uniformly
  // random split into positive parts (the first version). "equal": every chain
  // has M / R variables (R must divide M). With unequal chains a deep answer
  // can be found by elimination instead of by following its chain (a root
  // whose chain is short is recognised in a few steps, and the answer is then
  // the other root): docs/tasks.md, "Elimination".
  std::string split = "random";

  bool fused() const { return grammar == "fused"; }
  bool equals() const { return grammar == "equals"; }
  // Throws ada::Error naming the flag when the options cannot make a program.
  void validate() const;
  // fused: M assignment tokens, Q (query, answer) pairs, '\n'; the others:
  // 4 (equals) or 3 (compact) tokens per assignment and per query.
  int line_tokens() const {
    return fused() ? assignments + 2 * queries + 1 : (equals() ? 4 : 3) * (assignments + queries);
  }
  // The longest chain, hence the most lookups an answer can need.
  int max_hops() const { return split == "equal" ? assignments / chains : assignments - chains + 1; }
  // Class names, in id order: format, name, value, hop1 .. hop<max_hops>.
  std::vector<std::string> class_names() const;
};

// A token of any grammar as text: a fused assignment as "v=d;" or "v=u;", a
// fused query as "?v=", other ASCII as itself, so a fused line reads like
// the equals grammar's. For display (make_task's example,
// study's passage); other bytes give "".
std::string chain_token_text(int32_t id);
// True when a data set's class names are this task's (format, name, value,
// hop1, ...): its tokens are then shown with chain_token_text.
bool is_chain_task_classes(const std::vector<std::string>& names);

enum ChainTaskClass : uint8_t { kTaskFormat = 0, kTaskName = 1, kTaskValue = 2, kTaskHop1 = 3 };

// Appends `lines` programs drawn with rng: their tokens (ASCII bytes) and the
// class of each token.
void generate_chain_task(const ChainTaskOptions& o, size_t lines, Rng& rng, std::vector<int32_t>& tokens,
                         std::vector<uint8_t>& classes);

}  // namespace ada
