// GPT-2 tokenizer: file loading (encoder.json through the project's JSON
// parser, the byte-to-unicode map) and encoding through the shared BpeEncoder.
#include "text/gpt2_tokenizer.h"

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "core/common.h"
#include "core/format.h"
#include "core/json.h"
#include "text/utf8.h"

namespace ada {

uint32_t gpt2_byte_to_unicode(uint8_t b) {
  const auto printable = [](uint32_t c) { return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE); };
  if (printable(b)) return b;
  // The non-printable bytes take U+0100, U+0101, ... in increasing byte order.
  uint32_t n = 0;
  for (uint32_t c = 0; c < b; ++c) n += !printable(c);
  return 256 + n;
}

std::vector<std::pair<std::string, int64_t>> parse_json_string_to_int(const std::string& json,
                                                                      const std::string& what) {
  const Json doc = parse_json(json, what);  // the project's strict parser (core/json.h)
  check(doc.is(Json::Type::Object), what + ": expected a JSON object {\"token\": id, ...}");
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(doc.members.size());
  for (const auto& [key, value] : doc.members) {
    uint64_t id = 0;
    check(value.to_u64(&id) && id <= uint64_t(INT64_MAX),
          what + ": the id of token " + json_quote(key) + " is not a non-negative integer");
    out.emplace_back(key, int64_t(id));
  }
  return out;
}

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& encoder_path, const std::string& vocab_path) {
  // Inverse of the byte-to-unicode map.
  std::unordered_map<uint32_t, uint8_t> unicode_to_byte;
  for (int b = 0; b < 256; ++b) unicode_to_byte[gpt2_byte_to_unicode(uint8_t(b))] = uint8_t(b);
  // A token string of encoder.json / vocab.bpe -> raw bytes; false if it uses
  // a character outside the map.
  const auto to_bytes = [&](std::string_view s, std::string& out) {
    out.clear();
    for (size_t i = 0; i < s.size();) {
      const Utf8Char c = utf8_decode(s, i);
      auto it = unicode_to_byte.find(c.cp);
      if (!c.valid || it == unicode_to_byte.end()) return false;
      out += char(it->second);
      i += c.len;
    }
    return true;
  };

  // encoder.json: token string -> id. Ids must be exactly 0..n-1.
  const std::string what = "GPT-2 encoder.json " + encoder_path;
  const auto entries = parse_json_string_to_int(read_tokenizer_file(encoder_path, "GPT-2 encoder.json"), what);
  check(!entries.empty(), what + ": no tokens");
  check(entries.size() <= kMaxBpeVocab, what + ": " + std::to_string(entries.size()) +
                                            " tokens, above the limit of " + std::to_string(kMaxBpeVocab));
  token_bytes_.assign(entries.size(), std::string());
  std::vector<bool> have(entries.size(), false);
  std::unordered_map<std::string, int32_t> id_of;  // raw bytes -> id
  std::string bytes;
  for (const auto& [key, id] : entries) {
    check(id < int64_t(entries.size()) && !have[id],
          what + ": token ids must be 0.." + std::to_string(entries.size() - 1) + " each once, found " +
              std::to_string(id));
    have[id] = true;
    if (key == "<|endoftext|>") {
      eot_ = int32_t(id);
      token_bytes_[id] = key;  // a special token: its text, not map-encoded bytes
      continue;
    }
    check(to_bytes(key, bytes), what + ": token " + std::to_string(id) +
                                    " uses a character outside GPT-2's byte-to-unicode map");
    check(bytes.size() <= kMaxTokenBytes, what + ": token " + std::to_string(id) + " is " +
                                              std::to_string(bytes.size()) + " bytes long, above the limit of " +
                                              std::to_string(kMaxTokenBytes));
    token_bytes_[id] = bytes;
    id_of.emplace(bytes, int32_t(id));
  }
  check(eot_ >= 0, what + ": no <|endoftext|> token");

  std::array<int32_t, 256> byte_ids;
  for (int b = 0; b < 256; ++b) {
    auto it = id_of.find(std::string(1, char(b)));
    check(it != id_of.end(), what + ": no token for byte " + std::to_string(b));
    byte_ids[b] = it->second;
  }

  // vocab.bpe: "#version" line, then "A B" per line in rank order.
  const std::string vdata = read_tokenizer_file(vocab_path, "GPT-2 vocab.bpe");
  std::vector<BpeRule> rules;
  std::unordered_set<uint64_t> seen;  // (left, right) pairs, to refuse repeats
  std::string left, right;
  size_t line_no = 0;
  const size_t bom = vdata.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a UTF-8 byte order mark is skipped
  for (size_t i = bom; i < vdata.size();) {
    size_t nl = vdata.find('\n', i);
    if (nl == std::string::npos) nl = vdata.size();
    std::string_view line = std::string_view(vdata).substr(i, nl - i);
    i = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_no == 1) {
      check(line.substr(0, 8) == "#version", "GPT-2 vocab.bpe " + vocab_path +
                                                 ": first line should be '#version: 0.2', found " +
                                                 quote_untrusted(line, 40));
      continue;
    }
    if (line.empty()) continue;
    const std::string where = "GPT-2 vocab.bpe " + vocab_path + " line " + std::to_string(line_no) + ": ";
    const size_t sp = line.find(' ');
    check(sp != std::string_view::npos && sp > 0 && line.find(' ', sp + 1) == std::string_view::npos &&
              sp + 1 < line.size(),
          where + "expected two tokens separated by one space");
    check(to_bytes(line.substr(0, sp), left) && to_bytes(line.substr(sp + 1), right),
          where + "character outside GPT-2's byte-to-unicode map");
    auto a = id_of.find(left), b = id_of.find(right), ab = id_of.find(left + right);
    check(a != id_of.end() && b != id_of.end() && ab != id_of.end(),
          where + "merge of tokens that are not in encoder.json");
    // Every merge of a trained BPE makes a new token, so there are fewer
    // merges than tokens.
    check(rules.size() < token_bytes_.size(), where + "more merges than the " +
                                                  std::to_string(token_bytes_.size()) + " tokens of encoder.json");
    check(seen.insert((uint64_t(uint32_t(a->second)) << 32) | uint32_t(b->second)).second,
          where + "duplicate merge (the same pair as an earlier line)");
    rules.push_back({a->second, b->second, ab->second});
  }
  check(!rules.empty(), "GPT-2 vocab.bpe " + vocab_path + ": no merges");
  encoder_ = BpeEncoder(byte_ids, rules);
}

std::vector<int32_t> Gpt2Tokenizer::encode(const std::string& text) const { return encoder_.encode(text); }

std::string Gpt2Tokenizer::decode_token(int32_t id) const {
  check(id >= 0 && id < int32_t(token_bytes_.size()),
        "token id " + std::to_string(id) + " is outside the gpt2 vocabulary (size " +
            std::to_string(token_bytes_.size()) + ")");
  return token_bytes_[id];
}

}  // namespace ada
