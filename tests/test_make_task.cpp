// The synthetic variable-chain task (text/chain_task.h, make_task) and its
// class side files (text/class_file.h): determinism, the classes against an
// independent reading of the text, refusal of damaged side files, and eval's
// per-class figures on a run trained briefly on the task.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "core/json.h"
#include "text/chain_task.h"
#include "text/class_file.h"
#include "text/dataset.h"
#include "text/shards.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;

namespace {

std::vector<int32_t> task_tokens(const ChainTaskOptions& o, size_t lines, uint64_t seed,
                                 std::vector<uint8_t>* classes = nullptr) {
  Rng rng(seed);
  std::vector<int32_t> t;
  std::vector<uint8_t> c;
  generate_chain_task(o, lines, rng, t, c);
  EXPECT_EQ(t.size(), c.size());
  if (classes) *classes = c;
  return t;
}

// The defaults before the fused grammar (docs/tasks.md's first measurements).
ChainTaskOptions equals_defaults() {
  ChainTaskOptions o;
  o.grammar = "equals", o.assignments = 8, o.chains = 3, o.queries = 8, o.letters = 26;
  return o;
}

bool is_letter(char c) { return c >= 'a' && c <= 'z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// One assignment or query as the text shows it: the name, what it holds
// (a digit, another name, or the answer) and their classes.
struct Group {
  char name, held;
  uint8_t name_cls, held_cls;
};

// Splits a program into its M + Q groups, checking the grammar's fixed
// tokens (separators, '=') and their class on the way.
std::vector<Group> read_groups(const std::string& line, const uint8_t* cls, const ChainTaskOptions& o) {
  const int M = o.assignments, Q = o.queries;
  std::vector<Group> g;
  if (o.grammar == "fused") {
    // M assignment tokens (one byte each: root or link), Q pairs (upper-case
    // name, answer digit), '\n'.
    for (int i = 0; i < M; i++) {
      const int id = (unsigned char)line[i];
      if (id >= 128 + 70) {  // link v=u: 198 + 7 v + u
        EXPECT_LT(id, 198 + 49) << i;
        g.push_back({char('a' + (id - 198) / 7), char('a' + (id - 198) % 7), cls[i], cls[i]});
      } else {  // root v=d: 128 + 10 v + d
        EXPECT_GE(id, 128) << i;
        g.push_back({char('a' + (id - 128) / 10), char('0' + (id - 128) % 10), cls[i], cls[i]});
      }
    }
    for (int q = 0; q < Q; q++) {
      const size_t i = M + 2 * q;
      EXPECT_TRUE(line[i] >= 'A' && line[i] <= 'Z') << "a query is an upper-case name";
      g.push_back({char(line[i] - 'A' + 'a'), line[i + 1], cls[i], cls[i + 1]});
    }
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(cls[line.size() - 1], kTaskFormat);
    return g;
  }
  // Groups of 4: name '=' (value, name or answer) separator; the compact
  // grammar leaves out the '=' (groups of 3).
  const bool eq = o.grammar == "equals";
  const int G = eq ? 4 : 3;
  for (int i = 0; i < M + Q; i++) {
    const char* p = line.data() + G * i;
    const uint8_t* c = cls + G * i;
    if (eq) {
      EXPECT_EQ(p[1], '=') << line;
      EXPECT_EQ(c[1], kTaskFormat) << line;
    }
    const char want_sep = i < M - 1 ? ';' : i < M + Q - 1 ? '?' : '\n';
    EXPECT_EQ(p[G - 1], want_sep) << line;
    EXPECT_EQ(c[G - 1], kTaskFormat) << line;
    g.push_back({p[0], p[G - 2], c[0], c[G - 2]});
  }
  return g;
}

// Reads one program the way a person would (without the generator's data
// structures) and checks every token's class; adds each query's hop count
// to `hops`. A query's lookups: a breadth-first search from the asked
// variable over the assignments "x=y" (either way) to the nearest variable
// whose digit the line already shows (an assignment "x=d" or an earlier
// answer "?x=d"), plus the one lookup that reads the digit.
void check_program(const std::string& line, const uint8_t* cls, const ChainTaskOptions& o, std::map<int, int>& hops) {
  const int M = o.assignments;
  ASSERT_EQ(line.size(), size_t(o.line_tokens()));
  std::map<char, std::vector<char>> links;  // undirected
  std::map<char, char> shown;               // variable -> digit the text shows for it
  std::set<char> defined, asked;
  int roots = 0;
  const std::vector<Group> groups = read_groups(line, cls, o);
  for (int g = 0; g < int(groups.size()); g++) {
    const char name = groups[g].name, held = groups[g].held;
    const uint8_t held_cls = groups[g].held_cls;
    ASSERT_TRUE(is_letter(name)) << line;
    EXPECT_LT(name, 'a' + o.letters) << "a name outside the first --letters letters: " << line;
    if (g < M) {  // an assignment
      EXPECT_TRUE(defined.insert(name).second) << "variable assigned twice: " << line;
      if (is_digit(held)) {
        EXPECT_EQ(held_cls, kTaskValue) << line;
        shown[name] = held;
        roots++;
      } else {
        ASSERT_TRUE(is_letter(held)) << line;
        EXPECT_EQ(held_cls, kTaskName) << line;
        EXPECT_EQ(groups[g].name_cls, kTaskName) << line;
        links[name].push_back(held);
        links[held].push_back(name);
      }
      continue;
    }
    EXPECT_EQ(groups[g].name_cls, kTaskName) << line;
    // a query: breadth-first search to the nearest shown digit
    EXPECT_TRUE(defined.count(name)) << line;
    EXPECT_TRUE(asked.insert(name).second) << "variable asked twice: " << line;
    std::map<char, int> dist = {{name, 0}};
    std::vector<char> frontier = {name};
    int found = -1;
    char digit = 0;
    for (size_t i = 0; i < frontier.size() && found < 0; i++) {
      const char v = frontier[i];
      if (shown.count(v)) found = dist[v], digit = shown[v];
      for (char u : links[v])
        if (!dist.count(u)) dist[u] = dist[v] + 1, frontier.push_back(u);
    }
    ASSERT_GE(found, 0) << "no digit reachable: " << line;
    EXPECT_EQ(held, digit) << "the answer is the digit of the variable's chain: " << line;
    const int k = found + 1;
    ASSERT_LE(k, o.max_hops()) << line;
    EXPECT_EQ(held_cls, kTaskHop1 + k - 1) << line;
    hops[k]++;
    shown[name] = held;
  }
  EXPECT_EQ(roots, o.chains) << line;
  for (auto& kv : links)
    for (char u : kv.second) EXPECT_TRUE(defined.count(u)) << "undefined variable " << u << ": " << line;
}

void check_programs(const std::vector<int32_t>& t, const std::vector<uint8_t>& cls, const ChainTaskOptions& o,
                    std::map<int, int>& hops) {
  const size_t L = o.line_tokens();
  ASSERT_EQ(t.size() % L, 0u);
  ASSERT_EQ(cls.size(), t.size());
  for (size_t s = 0; s < t.size(); s += L) {
    const std::string line(t.begin() + s, t.begin() + s + L);
    check_program(line, cls.data() + s, o, hops);
  }
}

// A class side file's bytes, built by hand (not by write_class_file).
std::string side_bytes(int32_t magic, int32_t version, int32_t n, int32_t c, const std::string& names,
                       const std::string& ids) {
  int32_t h[256] = {};
  h[0] = magic, h[1] = version, h[2] = n, h[3] = c, h[4] = int32_t(names.size());
  return std::string(reinterpret_cast<const char*>(h), sizeof(h)) + names + ids;
}

}  // namespace

TEST(ChainTask, SameSeedSameProgramsOtherSeedOthers) {
  ChainTaskOptions o;
  std::vector<uint8_t> c1, c2, c3;
  const auto a = task_tokens(o, 50, 7, &c1), b = task_tokens(o, 50, 7, &c2), c = task_tokens(o, 50, 8, &c3);
  EXPECT_EQ(a, b);
  EXPECT_EQ(c1, c2);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 50u * o.line_tokens());
  EXPECT_EQ(o.line_tokens(), 19);  // 6 assignments, 6 (query, answer) pairs, '\n': 6 programs in --seq 114
  EXPECT_EQ(o.max_hops(), 5);
  EXPECT_EQ(equals_defaults().line_tokens(), 64);
  EXPECT_EQ(equals_defaults().max_hops(), 6);
}

// Every token's class, every answer and the chain structure against an
// independent reading of the text; every hop count occurs, the short ones
// most; root digits are uniform.
TEST(ChainTask, ClassesAgreeWithAnIndependentReadingOfTheText) {
  ChainTaskOptions other = equals_defaults(), fused7;
  other.assignments = 12, other.chains = 2, other.queries = 4;
  fused7.assignments = 7, fused7.chains = 1, fused7.queries = 3, fused7.letters = 7;
  for (const ChainTaskOptions& o : {ChainTaskOptions(), equals_defaults(), other, fused7}) {
    SCOPED_TRACE(o.grammar + " M " + std::to_string(o.assignments) + " R " + std::to_string(o.chains));
    std::vector<uint8_t> cls;
    const size_t lines = 3000;
    const auto t = task_tokens(o, lines, 11, &cls);
    std::map<int, int> hops;
    check_programs(t, cls, o, hops);
    int answers = 0;
    for (auto& kv : hops) answers += kv.second;
    EXPECT_EQ(answers, int(lines) * o.queries);
    ASSERT_EQ(hops.size(), size_t(o.max_hops())) << "every hop count occurs";
    if (o.chains > 1) {
      for (int k = 2; k <= o.max_hops(); k++) EXPECT_GE(hops[2], hops[k]) << k;  // most need 1 or 2 lookups
    }
    // value digits are uniform: each digit 7% to 13% of the roots
    std::map<int, int> digits;
    size_t values = 0;
    for (size_t i = 0; i < t.size(); i++)
      if (cls[i] == kTaskValue) digits[o.fused() ? '0' + (t[i] - kFusedRoot) % 10 : t[i]]++, values++;
    EXPECT_EQ(values, lines * o.chains);
    ASSERT_EQ(digits.size(), 10u);
    for (auto& kv : digits) EXPECT_NEAR(double(kv.second) / values, 0.1, 0.03) << char(kv.first);
  }
  EXPECT_EQ(ChainTaskOptions().class_names(),
            (std::vector<std::string>{"format", "name", "value", "hop1", "hop2", "hop3", "hop4", "hop5"}));
  EXPECT_TRUE(is_chain_task_classes(ChainTaskOptions().class_names()));
  EXPECT_FALSE(is_chain_task_classes({"format", "name", "value"}));
}

namespace {

// The chain lengths of one fused line, read back from its M assignment
// tokens (a link token names its variable and its parent, a root token its
// variable): root letter -> number of variables in its chain.
std::map<int, int> chain_lengths(const int32_t* line, int M) {
  std::map<int, int> parent;  // letter -> parent letter (-1 for a root)
  for (int i = 0; i < M; i++) {
    if (line[i] >= kFusedLink) parent[(line[i] - kFusedLink) / kFusedMaxLetters] = (line[i] - kFusedLink) % kFusedMaxLetters;
    else parent[(line[i] - kFusedRoot) / 10] = -1;
  }
  EXPECT_EQ(parent.size(), size_t(M)) << "every variable assigned once";
  std::map<int, int> size;
  for (auto& [v, p] : parent) {
    int r = v;
    while (parent.at(r) >= 0) r = parent.at(r);
    size[r]++;
  }
  return size;
}

}  // namespace

// --split equal: every chain of every line has M / R variables (read back
// from the fused text: a link token names its variable and its parent), the
// answers need 1 .. M / R lookups, each count occurring; the classes still
// agree with the independent reader. The default split gives chains of
// unequal lengths in most lines.
TEST(ChainTask, EqualSplitGivesChainsOfOneLength) {
  for (auto [M, R] : {std::pair{6, 2}, std::pair{6, 3}, std::pair{6, 1}}) {
    ChainTaskOptions o;
    o.assignments = M, o.chains = R, o.queries = M, o.letters = std::max(M, 6);
    o.split = "equal";
    SCOPED_TRACE("M " + std::to_string(M) + " R " + std::to_string(R));
    EXPECT_EQ(o.max_hops(), M / R);
    EXPECT_EQ(o.class_names().size(), size_t(3 + M / R));
    std::vector<uint8_t> cls;
    const size_t lines = 500;
    const auto t = task_tokens(o, lines, 5, &cls);
    std::map<int, int> hops;
    check_programs(t, cls, o, hops);
    EXPECT_EQ(hops.size(), size_t(M / R)) << "every hop count occurs";
    for (size_t line = 0; line < lines; line++) {
      const std::map<int, int> size = chain_lengths(&t[line * o.line_tokens()], M);
      ASSERT_EQ(size.size(), size_t(R));
      for (auto& kv : size) ASSERT_EQ(kv.second, M / R) << "line " << line;
    }
  }
  // the random split: lines with chains of two lengths are the majority
  ChainTaskOptions o;
  const auto t = task_tokens(o, 200, 5);
  int unequal = 0;
  for (size_t line = 0; line < 200; line++)
    unequal += chain_lengths(&t[line * o.line_tokens()], o.assignments).begin()->second != 3;
  EXPECT_GT(unequal, 100);
}

TEST(ChainTask, OptionsThatCannotMakeAProgramAreRefused) {
  ChainTaskOptions o;
  o.assignments = 27;
  expect_error([&] { o.validate(); }, {"--assignments must be between 1 and 26"});
  o = ChainTaskOptions(), o.chains = 9;
  expect_error([&] { o.validate(); }, {"--chains must be between 1 and --assignments (6), got 9"});
  o = ChainTaskOptions(), o.letters = 8;
  expect_error([&] { o.validate(); }, {"--grammar fused", "at most 7 letters, got --letters 8"});
  o = ChainTaskOptions(), o.grammar = "colon";
  expect_error([&] { o.validate(); }, {"--grammar must be fused, equals or compact, got 'colon'"});
  o = ChainTaskOptions(), o.split = "even";
  expect_error([&] { o.validate(); }, {"--split must be random or equal, got 'even'"});
  o = ChainTaskOptions(), o.chains = 4, o.split = "equal";
  expect_error([&] { o.validate(); }, {"--split equal needs --chains (4) to divide --assignments (6)"});
  o = ChainTaskOptions(), o.queries = 0;
  expect_error([&] { o.validate(); }, {"--queries must be between 1 and --assignments (" +
                                           std::to_string(o.assignments) + "), got 0"});
  o = ChainTaskOptions(), o.letters = o.assignments - 1;
  expect_error([&] { o.validate(); }, {"--letters must be between --assignments (" + std::to_string(o.assignments) +
                                           ") and 26, got " + std::to_string(o.assignments - 1)});
}

// --grammar compact: the same programs as the default grammar with every '='
// (and its class) left out, read and checked by the same independent reader.
TEST(ChainTask, CompactGrammarIsTheSameProgramsWithoutTheEquals) {
  ChainTaskOptions eq = equals_defaults(), compact = equals_defaults();
  compact.grammar = "compact";
  EXPECT_EQ(compact.line_tokens(), 48);
  std::vector<uint8_t> ce, cc;
  const auto te = task_tokens(eq, 500, 9, &ce), tc = task_tokens(compact, 500, 9, &cc);
  std::vector<int32_t> stripped;
  std::vector<uint8_t> stripped_cls;
  for (size_t i = 0; i < te.size(); i++)
    if (te[i] != '=') stripped.push_back(te[i]), stripped_cls.push_back(ce[i]);
  EXPECT_EQ(tc, stripped);
  EXPECT_EQ(cc, stripped_cls);
  std::map<int, int> hops;
  check_programs(tc, cc, compact, hops);
  EXPECT_EQ(hops.size(), size_t(compact.max_hops()));
}

// --grammar fused (the default): the same programs as the equals grammar with
// each assignment one token and each "?v=" one upper-case token; every id is
// below 256 (the byte tokenizer) and chain_token_text shows it as the equals
// grammar writes it.
TEST(ChainTask, FusedGrammarIsTheSameProgramsOneTokenPerAssignment) {
  ChainTaskOptions fused, eq;
  eq.grammar = "equals";
  std::vector<uint8_t> cf, ce;
  const auto tf = task_tokens(fused, 400, 4, &cf), te = task_tokens(eq, 400, 4, &ce);
  std::string shown_f, shown_e;
  for (int32_t id : tf) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 256);
    const std::string s = chain_token_text(id);
    ASSERT_FALSE(s.empty()) << id;
    shown_f += s;
  }
  for (int32_t id : te) shown_e += char(id);
  // the fused text is the equals one with the last assignment also ending in ';'
  std::string want;
  for (size_t i = 0, first = 0; i < shown_e.size(); i++) {
    if (shown_e[i] == '?' && !first) want += ';', first = 1;
    if (shown_e[i] == '\n') first = 0;
    want += shown_e[i];
  }
  EXPECT_EQ(shown_f, want);
  EXPECT_EQ(chain_token_text(kFusedRoot + 10 * 2 + 7), "c=7;");
  EXPECT_EQ(chain_token_text(kFusedLink + kFusedMaxLetters * 4 + 1), "e=b;");
  EXPECT_EQ(chain_token_text('C'), "?c=");
  EXPECT_EQ(chain_token_text(300), "");
  std::map<int, int> hops;
  check_programs(tf, cf, fused, hops);
  EXPECT_EQ(hops.size(), size_t(fused.max_hops()));
  // same classes of the answers, in the same order
  std::vector<uint8_t> af, ae;
  for (uint8_t c : cf)
    if (c >= kTaskHop1) af.push_back(c);
  for (uint8_t c : ce)
    if (c >= kTaskHop1) ae.push_back(c);
  EXPECT_EQ(af, ae);
}

// --letters N: the names come from the first N letters, every one of them
// used when N = --assignments; N = 26 draws the same programs as before the
// option existed (one permutation of the alphabet per line).
TEST(ChainTask, NamesComeFromTheFirstLettersOfTheAlphabet) {
  ChainTaskOptions o;
  o.grammar = "equals", o.assignments = 5, o.chains = 2, o.queries = 5, o.letters = 5;
  std::vector<uint8_t> cls;
  const auto t = task_tokens(o, 200, 3, &cls);
  std::map<int, int> hops;
  check_programs(t, cls, o, hops);
  std::set<char> used;
  for (size_t i = 0; i < t.size(); i++)
    if (cls[i] == kTaskName) used.insert(char(t[i]));
  EXPECT_EQ(used, (std::set<char>{'a', 'b', 'c', 'd', 'e'}));
  o.grammar = "equals", o.letters = 26;
  const auto wide = task_tokens(o, 200, 3);
  std::set<char> wide_used;
  for (int32_t x : wide)
    if (is_letter(char(x))) wide_used.insert(char(x));
  EXPECT_GT(wide_used.size(), 20u);
}

TEST(ClassFile, RoundTripAndAttachedToShardsOfADataset) {
  const std::string dir = scratch_dir("class_files");
  ChainTaskOptions o;
  TokenClasses all;
  all.names = o.class_names();
  std::vector<int32_t> toks = task_tokens(o, 6, 3, &all.ids);
  // two train shards (4 and 2 programs) and one val shard
  const size_t cut = 4 * o.line_tokens();
  auto part = [&](size_t b, size_t e) {
    TokenClasses c;
    c.names = all.names;
    c.ids.assign(all.ids.begin() + b, all.ids.begin() + e);
    return c;
  };
  write_shard(dir + "/t_train_000000.bin", std::vector<int32_t>(toks.begin(), toks.begin() + cut), 256);
  write_shard(dir + "/t_train_000001.bin", std::vector<int32_t>(toks.begin() + cut, toks.end()), 256);
  write_class_file(class_file_for(dir + "/t_train_000000.bin"), part(0, cut));
  write_class_file(dir + "/t_train_000001.cls", part(cut, toks.size()));
  const TokenClasses back = read_class_file(dir + "/t_train_000001.cls");
  EXPECT_EQ(back.names, all.names);
  EXPECT_EQ(back.ids, part(cut, toks.size()).ids);

  // no val shard: the validation split is the last tokens, with their classes
  Dataset ds = open_dataset(dir, nullptr, 0.25);
  ASSERT_NE(ds.train->classes(), nullptr);
  ASSERT_NE(ds.val->classes(), nullptr);
  EXPECT_NE(ds.description.find("class side files (" + std::to_string(all.names.size()) + " classes)"),
            std::string::npos)
      << ds.description;
  const size_t n_val = ds.val->size();
  EXPECT_EQ(ds.train->classes()->ids, std::vector<uint8_t>(all.ids.begin(), all.ids.end() - n_val));
  EXPECT_EQ(ds.val->classes()->ids, std::vector<uint8_t>(all.ids.end() - n_val, all.ids.end()));
  EXPECT_EQ(ds.val->classes()->names, all.names);

  // with a val shard and its side file
  write_shard(dir + "/t_val_000000.bin", std::vector<int32_t>(toks.begin(), toks.begin() + cut), 256);
  write_class_file(dir + "/t_val_000000.cls", part(0, cut));
  ds = open_dataset(dir + "/t_train_*.bin", nullptr);
  ASSERT_NE(ds.train->classes(), nullptr);
  EXPECT_EQ(ds.train->classes()->ids, all.ids);
  ASSERT_NE(ds.val->classes(), nullptr);
  EXPECT_EQ(ds.val->classes()->ids, part(0, cut).ids);

  // shards without side files have no classes
  const std::string plain = scratch_dir("class_files_plain");
  write_shard(plain + "/p_train_000000.bin", toks, 256);
  EXPECT_EQ(open_dataset(plain, nullptr).train->classes(), nullptr);
}

TEST(ClassFile, DamagedFilesAreRefusedNamingTheFile) {
  const std::string dir = scratch_dir("class_bad");
  const std::string names = "format\nhop1\n", f = dir + "/x.cls";
  write_bytes(f, side_bytes(kClassFileMagic, 1, 3, 2, names, std::string("\0\1\1", 3)));
  EXPECT_EQ(read_class_file(f).ids, (std::vector<uint8_t>{0, 1, 1}));

  struct Case {
    std::string bytes, needle;
  };
  const std::vector<Case> cases = {
      {side_bytes(20240520, 1, 3, 2, names, std::string(3, '\0')), "wrong magic number 20240520"},
      {side_bytes(kClassFileMagic, 2, 3, 2, names, std::string(3, '\0')), "unsupported version 2"},
      {side_bytes(kClassFileMagic, 1, 4, 2, names, std::string(3, '\0')), "header says 4 tokens"},
      {side_bytes(kClassFileMagic, 1, 3, 2, names, std::string(4, '\0')), "but the file has"},
      {side_bytes(kClassFileMagic, 1, 3, 2, names, std::string("\0\2\0", 3)), "token 1 has class 2 but there are 2"},
      {side_bytes(kClassFileMagic, 1, 3, 3, names, std::string(3, '\0')), "header says 3 classes but the names block has 2"},
      {side_bytes(kClassFileMagic, 1, 3, 0, names, std::string(3, '\0')), "0 classes in the header"},
      {side_bytes(kClassFileMagic, 1, 3, 2, "format\nhop 1\n", std::string(3, '\0')), "outside [A-Za-z0-9_-]"},
      {side_bytes(kClassFileMagic, 1, 3, 2, "a\na\n", std::string(3, '\0')), "'a' appears twice"},
      {side_bytes(kClassFileMagic, 1, 3, 2, "format\nhop1", std::string(3, '\0')), "does not end with a newline"},
      {side_bytes(kClassFileMagic, 1, -1, 2, names, ""), "negative token count"},
      {std::string(100, '\0'), "too short for its header: 100 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    write_bytes(f, c.bytes);
    expect_error([&] { read_class_file(f); }, {"class side file " + f, c.needle});
  }
  expect_error([&] { read_class_file(dir + "/missing.cls"); }, {"class side file not found: " + dir + "/missing.cls"});
  TokenClasses bad;
  bad.names = {"a", "b"};
  bad.ids = {0, 2};
  expect_error([&] { write_class_file(f, bad); }, {"token 1 has class 2"});
}

// A side file must match its shard and its sibling shards' side files.
TEST(ClassFile, SideFilesMustMatchTheirShards) {
  const std::string dir = scratch_dir("class_mismatch");
  const std::vector<int32_t> toks = {'a', '=', '1', ';'};
  TokenClasses c;
  c.names = {"format", "name"};
  c.ids = {1, 0, 1, 0};
  write_shard(dir + "/m_train_000000.bin", toks, 256);
  write_shard(dir + "/m_train_000001.bin", toks, 256);
  write_class_file(dir + "/m_train_000000.cls", c);
  // the second shard has no side file
  expect_error([&] { open_dataset(dir + "/m_train_*.bin", nullptr); },
               {"class side file not found: " + dir + "/m_train_000001.cls", "every shard of a run needs one"});
  // other class names
  TokenClasses other = c;
  other.names = {"format", "value"};
  write_class_file(dir + "/m_train_000001.cls", other);
  expect_error([&] { open_dataset(dir + "/m_train_*.bin", nullptr); },
               {"class side file " + dir + "/m_train_000001.cls names the classes format,value", "format,name"});
  // fewer ids than the shard has tokens
  other = c;
  other.ids.pop_back();
  write_class_file(dir + "/m_train_000001.cls", other);
  expect_error([&] { open_dataset(dir + "/m_train_*.bin", nullptr); },
               {"class side file " + dir + "/m_train_000001.cls has 3 class ids but its shard", "has 4 tokens"});
  // a damaged side file beside a shard stops the loading too
  write_bytes(dir + "/m_train_000001.cls", "junk");
  expect_error([&] { open_dataset(dir + "/m_train_*.bin", nullptr); },
               {"class side file " + dir + "/m_train_000001.cls is too short for its header"});
}

// make_task: the same seed gives the same bytes, another seed others; the
// side files match the shards and an independent reading of the programs.
TEST(MakeTask, DeterministicFilesWhoseClassesMatchTheirShards) {
  const std::string make_task = program("make_task");
  if (make_task.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("make_task");
  const std::string args = " --train-tokens 20000 --val-tokens 3000";
  for (const char* run : {"a", "b", "c"}) {
    const std::string seed = std::string(run) == "c" ? "2" : "1";
    const ProgramResult r = run_program(make_task + " --out " + dir + "/" + run + " --seed " + seed + args, dir);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find(std::to_string(ChainTaskOptions().line_tokens()) + " tokens per program"), std::string::npos)
        << r.out;
  }
  const std::vector<std::string> files = {"chains_train_000000.bin", "chains_train_000000.cls", "chains_val_000000.bin",
                                          "chains_val_000000.cls"};
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    const std::string a = read_bytes(dir + "/a/" + f);
    ASSERT_GT(a.size(), 1024u);
    EXPECT_EQ(a, read_bytes(dir + "/b/" + f));
    EXPECT_NE(a, read_bytes(dir + "/c/" + f));
  }
  const ChainTaskOptions o;
  for (const char* split : {"train", "val"}) {
    SCOPED_TRACE(split);
    const std::string shard = dir + "/a/chains_" + std::string(split) + "_000000.bin";
    ShardTokens s(shard);
    const TokenClasses c = read_class_file(class_file_for(shard));
    ASSERT_EQ(c.ids.size(), s.size());
    EXPECT_EQ(c.names, o.class_names());
    const size_t L = o.line_tokens();
    const size_t want = std::string(split) == "train" ? 20000 / L * L : 3000 / L * L;
    ASSERT_EQ(s.size(), want);
    std::vector<int32_t> t(s.size());
    s.read(0, t.size(), t.data());
    std::map<int, int> hops;
    check_programs(t, c.ids, o, hops);
    int answers = 0;
    for (auto& kv : hops) answers += kv.second;
    EXPECT_EQ(answers, int(want / L * o.queries));
  }
  const std::string too_many = std::to_string(o.assignments + 1);
  expect_program_error(run_program(make_task + " --out " + dir + "/d --queries " + too_many, dir),
                       "--queries must be between 1 and --assignments (" + std::to_string(o.assignments) + "), got " +
                           too_many);
  expect_program_error(run_program(make_task + " --seed 3", dir), "--out is required");
}

// eval on a checkpoint trained briefly on the task prints one row per class,
// and its per-token file's classes are the side file's.
TEST(MakeTask, EvalPrintsPerClassFigures) {
  const std::string make_task = program("make_task"), train_cpu = program("train_cpu"), eval = program("eval");
  if (make_task.empty() || train_cpu.empty() || eval.empty())
    GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("task_eval"), data = dir + "/data";
  ProgramResult r = run_program(make_task + " --out " + data + " --train-tokens 20000 --val-tokens 4096 --seed 5", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_program(train_cpu + " --config test --vocab 256 --tokenizer bytes --data " + data +
                      " --steps 30 --batch 4 --seq 64 --lr 1e-2 --eval-every 30 --eval-batches 2 --out " + dir + "/run",
                  dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_program(eval + " --ckpt " + dir + "/run --batches 0 --per-token " + dir + "/tok.csv", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_NE(r.out.find("per class"), std::string::npos) << r.out;

  // the side file's classes of the evaluated targets: windows of 64, stride 64
  const TokenClasses side = read_class_file(data + "/chains_val_000000.cls");
  const size_t L = ChainTaskOptions().line_tokens();
  ASSERT_EQ(side.ids.size(), 4096 / L * L);  // whole programs
  const size_t targets = (side.ids.size() - 1) / 64 * 64;
  std::vector<int> count(side.names.size());
  for (size_t p = 1; p <= targets; p++) count[side.ids[p]]++;

  std::stringstream ss(r.out.substr(r.out.find("per class")));
  std::string line;
  std::getline(ss, line);  // the header
  for (size_t c = 0; c < side.names.size(); c++) {
    ASSERT_TRUE(std::getline(ss, line)) << r.out;
    char name[64];
    double tokens, acc, nll, passes;
    ASSERT_EQ(std::sscanf(line.c_str(), " %63s %lf %lf %lf %lf", name, &tokens, &acc, &nll, &passes), 5) << line;
    EXPECT_EQ(name, side.names[c]);
    EXPECT_EQ(tokens, count[c]) << name;
    EXPECT_GT(tokens, 0) << name;
    EXPECT_GE(acc, 0);
    EXPECT_LE(acc, 1);
    EXPECT_GT(nll, 0);
    EXPECT_EQ(passes, 1.0);
  }
  // every evaluated token's class in --per-token is the side file's at its position
  std::stringstream pt(read_bytes(dir + "/tok.csv"));
  std::getline(pt, line);
  size_t n = 0;
  while (std::getline(pt, line)) {
    double nll, passes;
    int ok, cls;
    size_t pos;
    ASSERT_EQ(std::sscanf(line.c_str(), "%lf,%lf,%d,%zu,%d", &nll, &passes, &ok, &pos, &cls), 5) << line;
    ASSERT_LT(pos, side.ids.size());
    EXPECT_EQ(cls, side.ids[pos]) << "position " << pos;
    n++;
  }
  EXPECT_EQ(n, targets);
}

// eval splits each class's tokens by the passes they used ("by passes" and
// --json "by_passes"): the counts, shares, accuracies and NLLs are those of
// eval's own --per-token file. An AdaPonderLM run with random exits
// (--policy matched) gives every class tokens at every depth.
TEST(MakeTask, EvalPrintsWhereEachClassStops) {
  const std::string make_task = program("make_task"), train_cpu = program("train_cpu"), eval = program("eval");
  if (make_task.empty() || train_cpu.empty() || eval.empty())
    GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("task_by_passes"), data = dir + "/data";
  ProgramResult r = run_program(make_task + " --out " + data + " --train-tokens 20000 --val-tokens 4096 --seed 6", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_program(train_cpu + " --method adaponder --ponder-steps 2 --policy matched --policy-hist 0.3/0.3/0.4 "
                      "--config test --vocab 256 --tokenizer bytes --data " + data +
                      " --steps 3 --batch 2 --seq 64 --eval-every 3 --eval-batches 1 --out " + dir + "/run",
                  dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_program(eval + " --ckpt " + dir + "/run --batches 0 --per-token " + dir + "/tok.csv --json " + dir + "/e.json",
                  dir);
  ASSERT_EQ(r.status, 0) << r.err;

  // the table from the per-token file: [class][passes] -> tokens, correct, NLL sum
  struct Cell {
    long long tokens = 0, correct = 0;
    double nll = 0;
  };
  std::map<int, std::map<int, Cell>> want;
  std::stringstream pt(read_bytes(dir + "/tok.csv"));
  std::string line;
  std::getline(pt, line);
  while (std::getline(pt, line)) {
    double nll, passes;
    int ok, cls;
    size_t pos;
    ASSERT_EQ(std::sscanf(line.c_str(), "%lf,%lf,%d,%zu,%d", &nll, &passes, &ok, &pos, &cls), 5) << line;
    Cell& c = want[cls][(int)passes];
    c.tokens++, c.correct += ok, c.nll += nll;
  }
  const std::vector<std::string> names = ChainTaskOptions().class_names();
  size_t cells = 0;
  for (auto& [c, row] : want) {
    EXPECT_EQ(row.size(), 3u) << names[c] << ": random exits give every class every depth";
    cells += row.size();
  }

  // --json by_passes
  const Json j = parse_json(read_bytes(dir + "/e.json"), "e.json");
  const Json* bp = j.find("by_passes");
  ASSERT_TRUE(bp && bp->is(Json::Type::Array)) << read_bytes(dir + "/e.json");
  ASSERT_EQ(bp->items.size(), cells);
  for (const Json& x : bp->items) {
    const std::string cls = x.find("class")->text;
    const int c = (int)(std::find(names.begin(), names.end(), cls) - names.begin());
    ASSERT_LT(c, (int)names.size()) << cls;
    const int p = (int)x.find("passes")->number;
    ASSERT_TRUE(want[c].count(p)) << cls << " " << p;
    const Cell& w = want[c][p];
    long long class_tokens = 0;
    for (auto& kv : want[c]) class_tokens += kv.second.tokens;
    EXPECT_EQ(x.find("tokens")->number, w.tokens) << cls << " " << p;
    EXPECT_NEAR(x.find("share")->number, (double)w.tokens / class_tokens, 1e-9);
    EXPECT_NEAR(x.find("accuracy")->number, (double)w.correct / w.tokens, 1e-9);
    EXPECT_NEAR(x.find("nll")->number, w.nll / w.tokens, 1e-6);
  }

  // the printed lines: one per class and passes, in class order
  const size_t at = r.out.find("by passes");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::stringstream ss(r.out.substr(at));
  std::getline(ss, line);  // the header
  for (auto& [c, row] : want)
    for (auto& [p, w] : row) {
      ASSERT_TRUE(std::getline(ss, line)) << r.out;
      char name[64];
      int passes;
      long long tokens;
      double share, acc, nll;
      ASSERT_EQ(std::sscanf(line.c_str(), " %63s %d %lld %lf%% %lf %lf", name, &passes, &tokens, &share, &acc, &nll), 6)
          << line;
      EXPECT_EQ(name, names[c]);
      EXPECT_EQ(passes, p);
      EXPECT_EQ(tokens, w.tokens);
      EXPECT_NEAR(acc, (double)w.correct / w.tokens, 1e-4);
      EXPECT_NEAR(nll, w.nll / w.tokens, 1e-4);
    }
}
