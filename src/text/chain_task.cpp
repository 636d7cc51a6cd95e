// The variable-chain task: see chain_task.h and docs/tasks.md.
#include "text/chain_task.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "core/common.h"

namespace ada {

void ChainTaskOptions::validate() const {
  check(grammar == "fused" || grammar == "equals" || grammar == "compact",
        "--grammar must be fused, equals or compact, got '" + grammar + "'");
  check(assignments >= 1 && assignments <= 26,
        "--assignments must be between 1 and 26 (one letter per variable), got " + std::to_string(assignments));
  check(chains >= 1 && chains <= assignments, "--chains must be between 1 and --assignments (" +
                                                  std::to_string(assignments) + "), got " + std::to_string(chains));
  check(split == "random" || split == "equal", "--split must be random or equal, got '" + split + "'");
  check(split != "equal" || assignments % chains == 0,
        "--split equal needs --chains (" + std::to_string(chains) + ") to divide --assignments (" +
            std::to_string(assignments) + ")");
  check(letters >= assignments && letters <= 26, "--letters must be between --assignments (" +
                                                     std::to_string(assignments) + ") and 26, got " +
                                                     std::to_string(letters));
  check(queries >= 1 && queries <= assignments, "--queries must be between 1 and --assignments (" +
                                                    std::to_string(assignments) + "), got " + std::to_string(queries));
  check(!fused() || letters <= kFusedMaxLetters,
        "--grammar fused writes each assignment as one byte and has room for at most " +
            std::to_string(kFusedMaxLetters) + " letters, got --letters " + std::to_string(letters));
}

std::vector<std::string> ChainTaskOptions::class_names() const {
  std::vector<std::string> names = {"format", "name", "value"};
  for (int k = 1; k <= max_hops(); k++) names.push_back("hop" + std::to_string(k));
  return names;
}

std::string chain_token_text(int32_t id) {
  if (id >= 'A' && id < 'A' + kFusedMaxLetters) return std::string{'?', char(id - 'A' + 'a'), '='};  // a fused query
  if (id >= 0 && id < 128) return std::string(1, char(id));
  if (id >= kFusedRoot && id < kFusedLink)
    return std::string{char('a' + (id - kFusedRoot) / 10), '=', char('0' + (id - kFusedRoot) % 10), ';'};
  if (id >= kFusedLink && id < kFusedLink + kFusedMaxLetters * kFusedMaxLetters)  // 'v=u' 
    return std::string{char('a' + (id - kFusedLink) / kFusedMaxLetters), '=',
                       char('a' + (id - kFusedLink) % kFusedMaxLetters), ';'};
  return "";
}

bool is_chain_task_classes(const std::vector<std::string>& names) {
  return names.size() >= 4 && names[0] == "format" && names[1] == "name" && names[2] == "value" &&
         names[3] == "hop1";
}

namespace {

// A uniformly random permutation of 0..n-1 (Fisher-Yates).
std::vector<int> permutation(int n, Rng& rng) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  for (int i = n - 1; i > 0; i--) std::swap(p[i], p[rng.below(i + 1)]);
  return p;
}

}  // namespace

void generate_chain_task(const ChainTaskOptions& o, size_t lines, Rng& rng, std::vector<int32_t>& tokens,
                         std::vector<uint8_t>& classes) {
  o.validate();
  const int M = o.assignments, R = o.chains, Q = o.queries;
  auto put_id = [&](int32_t id, uint8_t cls) {
    tokens.push_back(id);
    classes.push_back(cls);
  };
  auto put = [&](char c, uint8_t cls) { put_id((unsigned char)c, cls); };
  for (size_t line = 0; line < lines; line++) {
    // Chain lengths: a uniformly random split of the M assignments into R
    // positive parts (R - 1 distinct cut points in 1..M-1), or R equal parts.
    std::vector<int> cuts;
    if (o.split == "equal") {
      for (int c = 1; c < R; c++) cuts.push_back(c * (M / R));
    } else {
      cuts = permutation(M - 1, rng);
      cuts.resize(R - 1);
      for (int& x : cuts) x += 1;
      std::sort(cuts.begin(), cuts.end());
    }
    cuts.insert(cuts.begin(), 0);
    cuts.push_back(M);

    // Variables numbered chain by chain (v - 1 is v's parent within a chain):
    // parent (-1 for a root), chain, and the chain's root digit. Names: a
    // random letter per variable, distinct, from the first N of the alphabet.
    std::vector<int> parent(M), chain_of(M), digit(M);
    for (int c = 0; c < R; c++) {
      const int d = int(rng.below(10));
      for (int v = cuts[c]; v < cuts[c + 1]; v++) parent[v] = v == cuts[c] ? -1 : v - 1, chain_of[v] = c, digit[v] = d;
    }
    const std::vector<int> letter = permutation(o.letters, rng);

    // The assignments in a random order.
    const std::vector<int> order = permutation(M, rng);
    for (int i = 0; i < M; i++) {
      const int v = order[i];
      if (o.fused()) {  // one token: what v holds is in it
        if (parent[v] < 0)
          put_id(kFusedRoot + 10 * letter[v] + digit[v], kTaskValue);
        else
          put_id(kFusedLink + kFusedMaxLetters * letter[v] + letter[parent[v]], kTaskName);
        continue;
      }
      put(char('a' + letter[v]), kTaskName);
      if (o.equals()) put('=', kTaskFormat);
      if (parent[v] < 0)
        put(char('0' + digit[v]), kTaskValue);
      else
        put(char('a' + letter[parent[v]]), kTaskName);
      put(i + 1 < M ? ';' : '?', kTaskFormat);
    }
    // Q distinct variables asked in a random order. A lookup finds one
    // "x=..." (an assignment, read either way, or an earlier answer): the
    // answer to v takes 1 + the distance along its chain to the nearest
    // variable whose digit the text already shows (the root, or one answered).
    const std::vector<int> asked = permutation(M, rng);
    std::vector<bool> known(M, false);
    for (int v = 0; v < M; v++) known[v] = parent[v] < 0;
    for (int q = 0; q < Q; q++) {
      const int v = asked[q];
      int hops = M + 1;
      for (int u = 0; u < M; u++)
        if (known[u] && chain_of[u] == chain_of[v]) hops = std::min(hops, 1 + std::abs(u - v));
      if (o.fused()) {  // "?v=" is one token, the upper-case name
        put(char('A' + letter[v]), kTaskName);
        put(char('0' + digit[v]), uint8_t(kTaskHop1 + hops - 1));
        known[v] = true;
        continue;
      }
      if (q > 0) put('?', kTaskFormat);
      put(char('a' + letter[v]), kTaskName);
      if (o.equals()) put('=', kTaskFormat);
      put(char('0' + digit[v]), uint8_t(kTaskHop1 + hops - 1));
      known[v] = true;
    }
    put('\n', kTaskFormat);
  }
}

}  // namespace ada
