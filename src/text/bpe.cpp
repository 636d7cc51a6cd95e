// Byte-level BPE: encoder, trainer, file format. See bpe.h for the model.
#include "text/bpe.h"

#include <algorithm>
#include <fstream>
#include <queue>
#include <sstream>
#include <sys/stat.h>
#include <unordered_set>

#include "core/common.h"
#include "text/pretokenize.h"

namespace ada {

// ---------------------------------------------------------------------------
// Encoder

BpeEncoder::BpeEncoder(const std::array<int32_t, 256>& byte_ids, const std::vector<BpeRule>& rules)
    : byte_ids_(byte_ids), rules_(rules) {
  check(rules.size() < size_t(INT32_MAX), "too many BPE merge rules: " + std::to_string(rules.size()));
  // Ids are non-negative: encode_chunk marks a merged-away symbol with -1.
  for (int32_t id : byte_ids) check(id >= 0, "BPE byte token ids must be non-negative");
  for (const BpeRule& r : rules) {
    check(r.left >= 0 && r.right >= 0 && r.result >= 0, "BPE merge rule ids must be non-negative");
  }
  merges_.reserve(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    // emplace keeps the first (lowest-ranked) rule of a repeated pair.
    merges_.emplace(pair_key(rules[r].left, rules[r].right), Merge{int32_t(r), rules[r].result});
  }
}

// The symbols of the chunk form a doubly linked list over their starting byte
// positions (a merged-away symbol is simply unlinked). A min-heap holds one
// entry (rank, position) for every adjacent pair that has a rule, plus stale
// entries left behind by merges; a stale entry is recognised when it is
// popped, because the pair at its position is no longer that rank's pair.
//
// One round takes the lowest rank r in the heap and pops all its entries, in
// position order, before merging any of them: this is the left-to-right
// "replace every occurrence" of the simple algorithm. Pairs created by the
// round's merges are pushed for later rounds, so even unusual rule sets (a
// new pair with a rank below r, or r's pair made again) give exactly the
// simple algorithm's tokens. Each merge pushes at most two entries, so a
// chunk of n bytes costs O(n log n).
void BpeEncoder::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  check(chunk.size() < size_t(INT32_MAX), "a pre-tokenizer chunk of " + std::to_string(chunk.size()) +
                                              " bytes is too long to encode (limit 2^31 - 1)");
  const int32_t n = int32_t(chunk.size());
  std::vector<int32_t> sym(n), prev(n), next(n);  // next == n: the last symbol
  for (int32_t i = 0; i < n; ++i) {
    sym[i] = byte_ids_[static_cast<unsigned char>(chunk[i])];
    prev[i] = i - 1;
    next[i] = i + 1;
  }
  // Min-heap of (rank << 32 | position).
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<uint64_t>> heap;
  const auto push_pair = [&](int32_t pos) {
    auto it = merges_.find(pair_key(sym[pos], sym[next[pos]]));
    if (it != merges_.end()) heap.push((uint64_t(it->second.rank) << 32) | uint32_t(pos));
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  std::vector<int32_t> round;
  while (!heap.empty()) {
    const uint32_t rank = uint32_t(heap.top() >> 32);
    round.clear();
    while (!heap.empty() && uint32_t(heap.top() >> 32) == rank) {
      const int32_t pos = int32_t(heap.top() & 0xFFFFFFFFu);
      heap.pop();
      if (round.empty() || round.back() != pos) round.push_back(pos);  // skip duplicate entries
    }
    const BpeRule& rule = rules_[rank];
    for (int32_t pos : round) {
      // Stale unless pos is still a symbol whose pair is this rule's pair.
      if (sym[pos] < 0 || next[pos] == n || sym[pos] != rule.left || sym[next[pos]] != rule.right) continue;
      const int32_t gone = next[pos];
      sym[pos] = rule.result;
      sym[gone] = -1;
      next[pos] = next[gone];
      if (next[pos] < n) prev[next[pos]] = pos;
      if (prev[pos] >= 0) push_pair(prev[pos]);
      if (next[pos] < n) push_pair(pos);
    }
  }
  for (int32_t i = 0; i < n; i = next[i]) out.push_back(sym[i]);
}

std::vector<int32_t> BpeEncoder::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3);
  // chunk -> its tokens; the views point into `text`, which outlives the map.
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < text.size();) {
    const size_t end = pretoken_end(text, i);
    const std::string_view chunk = text.substr(i, end - i);
    i = end;
    if (chunk.size() == 1) {  // nothing to merge
      out.push_back(byte_ids_[static_cast<unsigned char>(chunk[0])]);
      continue;
    }
    auto it = cache.find(chunk);
    if (it == cache.end()) {
      tokens.clear();
      encode_chunk(chunk, tokens);
      it = cache.emplace(chunk, tokens).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

// ---------------------------------------------------------------------------
// Trainer
//
// The corpus is reduced to its distinct chunks ("words") with their counts;
// each word is a doubly linked list of symbols, like a chunk in encode_chunk.
// We keep, for every adjacent token pair, its total count over the corpus and
// the list of places (word, position) where it occurs. A merge visits only
// those places: at each, the two pairs around the merged one are subtracted
// from the counts, the two symbols become one, and the two new pairs around
// it are added, with their places. So a merge costs O(its occurrences), not
// O(length of the words it touches), and one long word is no worse than many
// short ones. Places go stale when a neighbour merges; a stale place is
// recognised (its pair is no longer there) and skipped. The most frequent
// pair is taken from a max-heap with lazy deletion: an entry whose count no
// longer matches the current count is stale and skipped.

namespace {

struct Word {
  std::vector<int32_t> sym;         // -1 once merged into its left neighbour
  std::vector<int32_t> prev, next;  // linked list; next == size: the last symbol
  int64_t count;
};

// One occurrence of a pair: the position of its left symbol in a word.
struct Place {
  int32_t word, pos;
  bool operator<(const Place& o) const { return word != o.word ? word < o.word : pos < o.pos; }
  bool operator==(const Place& o) const { return word == o.word && pos == o.pos; }
};

struct PairEntry {
  int64_t count;
  int32_t left, right;
};

// Heap order: higher count first; on ties the smaller (left, right) first.
struct PairEntryLess {
  bool operator()(const PairEntry& a, const PairEntry& b) const {
    if (a.count != b.count) return a.count < b.count;
    if (a.left != b.left) return a.left > b.left;
    return a.right > b.right;
  }
};

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
int32_t key_left(uint64_t k) { return int32_t(k >> 32); }
int32_t key_right(uint64_t k) { return int32_t(k & 0xFFFFFFFFu); }

}  // namespace

std::vector<BpeMerge> train_bpe(std::string_view text, uint32_t vocab_size) {
  check(vocab_size >= 256,
        "BPE vocabulary size must be at least 256 (one token per byte), got " + std::to_string(vocab_size));
  check(vocab_size <= kMaxBpeVocab, "BPE vocabulary size " + std::to_string(vocab_size) +
                                        " is above the limit of " + std::to_string(kMaxBpeVocab));
  const size_t n_merges = vocab_size - 256;

  // Distinct chunks, sorted so that nothing depends on hash-map order.
  std::unordered_map<std::string_view, int64_t> chunk_counts;
  for (size_t i = 0; i < text.size();) {
    const size_t end = pretoken_end(text, i);
    check(end - i < size_t(INT32_MAX), "a pre-tokenizer chunk of " + std::to_string(end - i) +
                                           " bytes is too long to train on (limit 2^31 - 1)");
    ++chunk_counts[text.substr(i, end - i)];
    i = end;
  }
  std::vector<std::pair<std::string_view, int64_t>> sorted(chunk_counts.begin(), chunk_counts.end());
  std::sort(sorted.begin(), sorted.end());
  check(sorted.size() < size_t(INT32_MAX), "too many distinct chunks to train a BPE on");
  std::vector<Word> words(sorted.size());
  for (size_t w = 0; w < sorted.size(); ++w) {
    const std::string_view chunk = sorted[w].first;
    Word& word = words[w];
    word.count = sorted[w].second;
    for (int32_t i = 0; i < int32_t(chunk.size()); ++i) {
      word.sym.push_back(static_cast<unsigned char>(chunk[i]));
      word.prev.push_back(i - 1);
      word.next.push_back(i + 1);
    }
  }

  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<Place>> pair_places;  // may hold stale places
  for (int32_t w = 0; w < int32_t(words.size()); ++w) {
    const auto& s = words[w].sym;
    for (int32_t i = 0; i + 1 < int32_t(s.size()); ++i) {
      const uint64_t k = pair_key(s[i], s[i + 1]);
      pair_count[k] += words[w].count;
      pair_places[k].push_back({w, i});
    }
  }
  std::priority_queue<PairEntry, std::vector<PairEntry>, PairEntryLess> heap;
  for (const auto& [k, c] : pair_count) heap.push({c, key_left(k), key_right(k)});

  std::vector<BpeMerge> merges;
  std::vector<size_t> token_len(256, 1);  // bytes of each token so far
  std::vector<uint64_t> changed;
  while (merges.size() < n_merges && !heap.empty()) {
    const PairEntry top = heap.top();
    heap.pop();
    const uint64_t key = pair_key(top.left, top.right);
    auto cit = pair_count.find(key);
    if (cit == pair_count.end() || cit->second != top.count) continue;  // stale entry
    if (top.count < 2) break;  // only pairs that occur once are left
    // A pair whose token would be too long is never merged (its later heap
    // entries are skipped here too).
    if (token_len[top.left] + token_len[top.right] > kMaxTokenBytes) continue;

    const int32_t new_id = int32_t(256 + merges.size());
    merges.push_back({top.left, top.right});
    token_len.push_back(token_len[top.left] + token_len[top.right]);
    // Left to right within each word, as in encoding: in "a a a" only the
    // first (a, a) merges.
    std::vector<Place> places = std::move(pair_places[key]);
    pair_places.erase(key);
    std::sort(places.begin(), places.end());
    places.erase(std::unique(places.begin(), places.end()), places.end());

    changed.clear();
    const auto add = [&](int32_t w, int32_t pos, int64_t delta) {
      Word& word = words[w];
      const uint64_t k = pair_key(word.sym[pos], word.sym[word.next[pos]]);
      pair_count[k] += delta;
      changed.push_back(k);
      if (delta > 0) pair_places[k].push_back({w, pos});
    };
    for (const Place& pl : places) {
      Word& word = words[pl.word];
      const int32_t n = int32_t(word.sym.size()), p = pl.pos;
      // Stale unless the pair is still at this place. (The pair cannot form
      // anew: symbols only ever change into new ids.)
      if (word.sym[p] != top.left || word.next[p] == n || word.sym[word.next[p]] != top.right) continue;
      const int32_t q = word.next[p];
      const int64_t c = word.count;
      if (word.prev[p] >= 0) add(pl.word, word.prev[p], -c);
      add(pl.word, p, -c);
      if (word.next[q] < n) add(pl.word, q, -c);
      word.sym[p] = new_id;
      word.sym[q] = -1;
      word.next[p] = word.next[q];
      if (word.next[p] < n) word.prev[word.next[p]] = p;
      if (word.prev[p] >= 0) add(pl.word, word.prev[p], c);
      if (word.next[p] < n) add(pl.word, p, c);
    }
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    for (uint64_t k : changed) {
      const int64_t c = pair_count[k];
      if (c > 0) heap.push({c, key_left(k), key_right(k)});
    }
  }
  return merges;
}

// ---------------------------------------------------------------------------
// File format

void save_bpe(const std::string& path, const std::vector<BpeMerge>& merges) {
  std::ofstream f(path, std::ios::binary);
  check(bool(f), "cannot open BPE file for writing: " + path);
  f << "ada-bpe 1 " << (256 + merges.size()) << "\n";
  for (const BpeMerge& m : merges) f << m.left << ' ' << m.right << '\n';
  f.close();
  check(bool(f), "failed writing BPE file: " + path);
}

namespace {

// Splits a line at runs of spaces/tabs, stopping after `limit` fields (enough
// to tell a line with too many fields, without indexing a huge line).
std::vector<std::string_view> split_fields(std::string_view line, size_t limit) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size() && out.size() < limit) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// Decimal integer 0 .. 2^31-1; false for anything else.
bool parse_id(std::string_view s, int64_t& out) {
  if (s.empty() || s.size() > 10) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > INT32_MAX) return false;
  out = v;
  return true;
}

std::string quoted_excerpt(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) out += (c >= 32 && c < 127) ? c : '?';
  return out + (s.size() > 40 ? "...'" : "'");
}

}  // namespace

std::string read_tokenizer_file(const std::string& path, const std::string& what) {
  struct stat st;
  check(stat(path.c_str(), &st) == 0, what + " not found: " + path);
  check(!S_ISDIR(st.st_mode), what + " " + path + " is a folder, not a file");
  check(!S_ISREG(st.st_mode) || uint64_t(st.st_size) <= kMaxTokenizerFileBytes,
        what + " " + path + " is " + std::to_string(st.st_size) + " bytes, above the limit of " +
            std::to_string(kMaxTokenizerFileBytes) + " for a tokenizer file");
  std::ifstream f(path, std::ios::binary);
  check(bool(f), "cannot read " + what + ": " + path);
  std::string data;
  std::vector<char> buf(1 << 16);
  while (f.read(buf.data(), std::streamsize(buf.size())) || f.gcount() > 0) {
    data.append(buf.data(), size_t(f.gcount()));
    check(data.size() <= kMaxTokenizerFileBytes, what + " " + path + " is larger than the limit of " +
                                                     std::to_string(kMaxTokenizerFileBytes) +
                                                     " bytes for a tokenizer file");
  }
  check(!f.bad(), "cannot read " + what + ": " + path);
  check(!data.empty(), what + " is empty: " + path);
  return data;
}

std::vector<BpeMerge> load_bpe(const std::string& path) {
  const std::string data = read_tokenizer_file(path, "BPE file");

  // Lines are read one at a time (a file of many short lines must not
  // become a large index first).
  const std::string_view all(data);
  size_t pos = 0;
  const auto next_line = [&]() {
    size_t nl = all.find('\n', pos);
    if (nl == std::string_view::npos) nl = all.size();
    const std::string_view line = all.substr(pos, nl - pos);
    pos = nl + 1;
    return line;
  };
  const std::string_view first = next_line();
  const auto header = split_fields(first, 4);
  if (header.empty() || header[0] != "ada-bpe") {
    fail(path + " is not an ada-bpe file (first line " + quoted_excerpt(first) +
         ", expected 'ada-bpe 1 <vocab size>')");
  }
  int64_t version = 0, vocab = 0;
  check(header.size() == 3 && parse_id(header[1], version) && parse_id(header[2], vocab),
        path + " line 1: expected 'ada-bpe 1 <vocab size>', found " + quoted_excerpt(first));
  check(version == 1, path + ": unsupported ada-bpe version " + std::to_string(version) +
                          " (this program reads version 1)");
  check(vocab >= 256, path + ": vocabulary size " + std::to_string(vocab) + " is below 256");
  check(vocab <= int64_t(kMaxBpeVocab), path + " line 1: vocabulary size " + std::to_string(vocab) +
                                            " is above the limit of " + std::to_string(kMaxBpeVocab));

  std::vector<BpeMerge> merges;
  std::vector<size_t> token_len(256, 1);  // bytes of each defined token
  std::unordered_set<uint64_t> seen;
  for (size_t ln = 2; pos < all.size(); ++ln) {
    const std::string_view line = next_line();
    if (line.empty() && pos >= all.size()) break;  // a blank last line
    const std::string where = path + " line " + std::to_string(ln) + ": ";
    check(int64_t(merges.size()) < vocab - 256,
          where + "more merges than the header's vocabulary size " + std::to_string(vocab) + " allows (" +
              std::to_string(vocab - 256) + ")");
    const auto fields = split_fields(line, 3);
    int64_t a = 0, b = 0;
    check(fields.size() == 2 && parse_id(fields[0], a) && parse_id(fields[1], b),
          where + "expected two token ids, found " + quoted_excerpt(line));
    const int64_t defined = 256 + int64_t(merges.size());
    check(a < defined && b < defined, where + "merge uses token " + std::to_string(std::max(a, b)) +
                                          " which is not defined yet (ids below " +
                                          std::to_string(defined) + " exist here)");
    check(seen.insert(pair_key(int32_t(a), int32_t(b))).second,
          where + "duplicate merge " + std::to_string(a) + " " + std::to_string(b));
    const size_t len = token_len[a] + token_len[b];
    check(len <= kMaxTokenBytes, where + "merge " + std::to_string(a) + " " + std::to_string(b) +
                                     " makes a token of " + std::to_string(len) +
                                     " bytes, above the limit of " + std::to_string(kMaxTokenBytes));
    token_len.push_back(len);
    merges.push_back({int32_t(a), int32_t(b)});
  }
  check(int64_t(merges.size()) == vocab - 256,
        path + ": header says vocabulary size " + std::to_string(vocab) + " (" + std::to_string(vocab - 256) +
            " merges) but the file has " + std::to_string(merges.size()) + " merges");
  return merges;
}

// ---------------------------------------------------------------------------
// Tokenizer

BpeTokenizer::BpeTokenizer(std::vector<BpeMerge> merges) : merges_(std::move(merges)) {
  token_bytes_.reserve(256 + merges_.size());
  std::array<int32_t, 256> byte_ids;
  for (int b = 0; b < 256; ++b) {
    token_bytes_.push_back(std::string(1, char(b)));
    byte_ids[b] = b;
  }
  check(merges_.size() <= kMaxBpeVocab - 256, "BPE vocabulary of " + std::to_string(256 + merges_.size()) +
                                                  " tokens is above the limit of " + std::to_string(kMaxBpeVocab));
  std::vector<BpeRule> rules;
  rules.reserve(merges_.size());
  std::unordered_set<uint64_t> seen;
  for (const BpeMerge& m : merges_) {
    const int32_t id = int32_t(token_bytes_.size());
    check(m.left >= 0 && m.right >= 0 && m.left < id && m.right < id,
          "BPE merge " + std::to_string(id - 256) + " uses a token that does not exist yet");
    check(seen.insert(pair_key(m.left, m.right)).second,
          "BPE merge " + std::to_string(id - 256) + " repeats an earlier pair");
    const size_t len = token_bytes_[m.left].size() + token_bytes_[m.right].size();
    check(len <= kMaxTokenBytes, "BPE merge " + std::to_string(id - 256) + " makes a token of " +
                                     std::to_string(len) + " bytes, above the limit of " +
                                     std::to_string(kMaxTokenBytes));
    token_bytes_.push_back(token_bytes_[m.left] + token_bytes_[m.right]);
    rules.push_back({m.left, m.right, id});
  }
  encoder_ = BpeEncoder(byte_ids, rules);
}

std::vector<int32_t> BpeTokenizer::encode(const std::string& text) const { return encoder_.encode(text); }

std::string BpeTokenizer::decode_token(int32_t id) const {
  check(id >= 0 && id < int32_t(token_bytes_.size()),
        "token id " + std::to_string(id) + " is outside the " + name() + " vocabulary (size " +
            std::to_string(token_bytes_.size()) + ")");
  return token_bytes_[id];
}

}  // namespace ada
