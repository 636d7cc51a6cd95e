// Dataset specs -> train/val token sources; see dataset.h for the rules.
#include "text/dataset.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <glob.h>
#include <sstream>
#include <sys/stat.h>

#include "core/common.h"
#include "text/shards.h"
#include "text/utf8.h"

namespace ada {

SliceTokens::SliceTokens(std::shared_ptr<const TokenSource> base, size_t begin, size_t n)
    : base_(std::move(base)), begin_(begin), n_(n) {
  check(begin + n <= base_->size(), "token slice past the end of its source");
  if (const TokenClasses* c = base_->classes()) {
    classes_.names = c->names;
    classes_.ids.assign(c->ids.begin() + begin, c->ids.begin() + begin + n);
  }
}

void SliceTokens::read(size_t start, size_t n, int32_t* out) const {
  check(start + n <= n_, "token read past the end of the data");
  base_->read(begin_ + start, n, out);
}

std::string SliceTokens::locate(size_t pos) const { return base_->locate(begin_ + pos); }

void check_vocab(const TokenSource& source, uint32_t vocab_size, const std::string& what) {
  // This object's own earlier scan already found every id below the bound.
  if (source.scanned_below != 0 && source.scanned_below <= vocab_size) return;
  const size_t block = 1 << 20;
  std::vector<int32_t> buf(std::min(block, source.size()));
  int32_t max_id = 0;
  for (size_t start = 0; start < source.size(); start += block) {
    const size_t n = std::min(block, source.size() - start);
    source.read(start, n, buf.data());
    const size_t bad = first_outside_vocab(buf.data(), n, vocab_size);
    if (bad < n) {
      fail(what + ": token id " + std::to_string(buf[bad]) + " at " + source.locate(start + bad) +
           " is outside the vocabulary (size " + std::to_string(vocab_size) + ")");
    }
    for (size_t i = 0; i < n; ++i) max_id = std::max(max_id, buf[i]);
  }
  source.scanned_below = uint32_t(max_id) + 1;
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    struct stat st;
    check(::stat(path.c_str(), &st) == 0, "text file not found: " + path);
    fail("cannot read text file: " + path);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  check(!text.empty(), "text file is empty: " + path);
  const size_t bad = utf8_find_invalid(text);
  if (bad != std::string::npos) {
    const size_t line = 1 + size_t(std::count(text.begin(), text.begin() + bad, '\n'));
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(text[bad]));
    fail("text file " + path + " is not valid UTF-8: byte " + hex + " at byte offset " + std::to_string(bad) +
         " (line " + std::to_string(line) + ")");
  }
  return text;
}

std::vector<int32_t> tokenize_document(const std::string& text, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  if (tokenizer.eot_id() >= 0) ids.push_back(tokenizer.eot_id());
  std::vector<int32_t> body = tokenizer.encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

size_t num_val_tokens(size_t n, double val_fraction) {
  check(val_fraction >= 0 && val_fraction < 1,
        "validation fraction must be in [0, 1), got " + std::to_string(val_fraction));
  size_t n_val = size_t(double(n) * val_fraction);
  if (val_fraction > 0 && n >= 2 && n_val == 0) n_val = 1;
  return n_val;
}

namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Sorted matches of a glob pattern; empty when none.
std::vector<std::string> glob_files(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

// Splits `all` into its first part (train) and last part (val).
void split(Dataset& ds, std::shared_ptr<const TokenSource> all, double val_fraction) {
  const size_t n = all->size();
  const size_t n_val = num_val_tokens(n, val_fraction);
  ds.train = std::make_shared<SliceTokens>(all, 0, n - n_val);
  ds.val = std::make_shared<SliceTokens>(all, n - n_val, n_val);
}

Dataset shard_dataset(const std::vector<std::string>& train_files, std::vector<std::string> val_files,
                      double val_fraction) {
  // A file matched by both patterns stays training data.
  val_files.erase(std::remove_if(val_files.begin(), val_files.end(),
                                 [&](const std::string& f) {
                                   return std::find(train_files.begin(), train_files.end(), f) !=
                                          train_files.end();
                                 }),
                  val_files.end());
  Dataset ds;
  auto train = std::make_shared<MultiShardTokens>(train_files);
  std::string desc = std::to_string(train_files.size()) + " train shard(s) from " + train_files.front();
  if (!val_files.empty()) {
    ds.train = train;
    ds.val = std::make_shared<MultiShardTokens>(val_files);
    desc += ", " + std::to_string(val_files.size()) + " val shard(s) from " + val_files.front();
  } else {
    split(ds, train, val_fraction);
    desc += ", no val shards: the last " + std::to_string(ds.val->size()) + " tokens are validation";
  }
  if (const TokenClasses* c = ds.train->classes()) desc += ", class side files (" + std::to_string(c->names.size()) + " classes)";
  ds.description = desc;
  return ds;
}

}  // namespace

Dataset open_dataset(const std::string& spec, const Tokenizer* tokenizer, double val_fraction) {
  num_val_tokens(0, val_fraction);  // validates the fraction up front
  Dataset ds;
  const bool wildcard = spec.find_first_of("*?[") != std::string::npos;
  if (is_dir(spec)) {
    const auto train = glob_files(spec + "/*train*.bin");
    check(!train.empty(), "no training shards (*train*.bin) in directory " + spec);
    ds = shard_dataset(train, glob_files(spec + "/*val*.bin"), val_fraction);
  } else if (wildcard || ends_with(spec, ".bin")) {
    const auto train = find_shards(spec);
    std::vector<std::string> val;
    // The validation twin of the pattern: last "train" in its file name -> "val".
    const size_t name_start = spec.rfind('/') == std::string::npos ? 0 : spec.rfind('/') + 1;
    const size_t t = spec.rfind("train");
    if (t != std::string::npos && t >= name_start) {
      val = glob_files(spec.substr(0, t) + "val" + spec.substr(t + 5));
    }
    ds = shard_dataset(train, val, val_fraction);
  } else {
    struct stat st;
    check(::stat(spec.c_str(), &st) == 0,
          "dataset not found: " + spec + " (expected a text file, a .bin shard, a glob pattern or a directory)");
    check(tokenizer != nullptr, "a text dataset needs a tokenizer: " + spec);
    const std::string text = read_text_file(spec);
    auto all = std::make_shared<VectorTokens>(tokenize_document(text, *tokenizer), "the tokens of " + spec);
    split(ds, all, val_fraction);
    ds.description = "text " + spec + " (" + std::to_string(text.size()) + " bytes) tokenized with " +
                     tokenizer->name() + ": " + std::to_string(all->size()) + " tokens";
  }
  if (tokenizer) {
    check_vocab(*ds.train, tokenizer->vocab_size(), "training data " + spec);
    check_vocab(*ds.val, tokenizer->vocab_size(), "validation data " + spec);
  }
  ds.description += "; train " + std::to_string(ds.train->size()) + " tokens, val " +
                    std::to_string(ds.val->size()) + " tokens";
  return ds;
}

}  // namespace ada
