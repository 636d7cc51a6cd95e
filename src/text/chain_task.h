// The synthetic task of docs/tasks.md: variable chains whose answers need a
// known number of sequential lookups. One program is one line of ASCII text,
// one character per token (the byte tokenizer: ids are the bytes):
//
//   e=h;u=3;h=u;b=e;r=8;k=1;w=r;t=k?h=3?w=8?e=3?r=8?u=3?t=1?k=1?b=3\n
//
// `assignments` assignments "v=d" (a root: a digit) or "v=u" (a copy of an
// earlier or later variable) in a random order, forming `chains` chains;
// then `queries` queries "?v=d", each asking a different variable, in a
// random order, answered by the root digit of its chain. A query's class is
// hop<k>, k the fewest lookups that find its answer in the text before it: a
// lookup reads one "x=..." -- an assignment, followed from either side, or an
// earlier query's answer "?x=d" -- so k = 1 + the distance along the chain to
// the nearest variable whose digit is already shown (its root, or a variable
// answered before). Every line has exactly 4 (assignments + queries) tokens,
// so windows of a multiple of that length hold whole programs.
//
// The class of every token (what predicting it takes, given what precedes):
//   format  '=', ';', '?', '\n': fixed by the grammar and the place in the line
//   name    a variable name: the generator's random choice of names, links
//           and query order
//   value   a root's digit: uniform over 0-9, irreducibly random
//   hop<k>  a query's answer, k lookups away (k = 1 .. assignments - chains + 1)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"

namespace ada {

struct ChainTaskOptions {
  int assignments = 8;  // M: assignments per program (distinct variables, at most 26)
  int chains = 3;       // R: chains per program (roots), each of at least one assignment
  int queries = 8;      // Q: variables asked per program (distinct; at most M)
  int letters = 26;     // N: names are drawn from the first N letters a, b, ... (M <= N <= 26)

  // Throws ada::Error naming the flag when the options cannot make a program.
  void validate() const;
  int line_tokens() const { return 4 * (assignments + queries); }
  // The longest chain, hence the most lookups an answer can need.
  int max_hops() const { return assignments - chains + 1; }
  // Class names, in id order: format, name, value, hop1 .. hop<max_hops>.
  std::vector<std::string> class_names() const;
};

enum ChainTaskClass : uint8_t { kTaskFormat = 0, kTaskName = 1, kTaskValue = 2, kTaskHop1 = 3 };

// Appends `lines` programs drawn with rng: their tokens (ASCII bytes) and the
// class of each token.
void generate_chain_task(const ChainTaskOptions& o, size_t lines, Rng& rng, std::vector<int32_t>& tokens,
                         std::vector<uint8_t>& classes);

}  // namespace ada
