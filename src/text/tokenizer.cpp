// Tokenizer base helpers, the byte tokenizer, and load_tokenizer().
#include "text/tokenizer.h"

#include <fstream>
#include <sys/stat.h>

#include "core/common.h"
#include "text/bpe.h"
#include "text/gpt2_tokenizer.h"

namespace ada {

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (int32_t id : ids) out += decode_token(id);
  return out;
}

std::vector<int32_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode_token(int32_t id) const {
  check(id >= 0 && id < 256, "token id " + std::to_string(id) + " is outside the bytes vocabulary (size 256)");
  return std::string(1, char(id));
}

namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<Tokenizer> load_gpt2_dir(const std::string& dir) {
  const std::string enc = dir + "/encoder.json";
  check(exists(enc), "GPT-2 tokenizer files not found: " + enc + " (expected encoder.json and vocab.bpe in " + dir + ")");
  return std::make_unique<Gpt2Tokenizer>(enc, dir + "/vocab.bpe");
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  check(!spec.empty(), "empty tokenizer name (expected bytes, gpt2, a GPT-2 folder or an ada-bpe file)");
  if (spec == "bytes") return std::make_unique<ByteTokenizer>();
  if (spec == "gpt2") return load_gpt2_dir(kDefaultGpt2Dir);
  check(exists(spec), "tokenizer not found: " + spec + " (expected bytes, gpt2, a GPT-2 folder or an ada-bpe file)");
  if (is_dir(spec)) return load_gpt2_dir(spec);
  if (ends_with(spec, ".json")) {
    const size_t slash = spec.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : spec.substr(0, slash);
    return std::make_unique<Gpt2Tokenizer>(spec, dir + "/vocab.bpe");
  }
  return std::make_unique<BpeTokenizer>(load_bpe(spec));
}

}  // namespace ada
