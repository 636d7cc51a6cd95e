// GPT-2's byte-level BPE tokenizer (50257 tokens, <|endoftext|> = 50256),
// loaded from OpenAI's two files:
//
//   encoder.json  a JSON object {"token string": id, ...}. Token strings are
//                 bytes written through GPT-2's byte-to-unicode map (below),
//                 so e.g. " the" is stored as "\u0120the" ("Ġthe").
//   vocab.bpe     a "#version: 0.2" line, then one merge per line, in rank
//                 order: two token strings separated by one space ("Ġ t").
//
// The byte-to-unicode map sends the 188 printable bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') to the code point of the same value and the 68 other bytes, in
// increasing order, to U+0100, U+0101, ... (so ' ' = 0x20 becomes U+0120 'Ġ').
// We undo it at load time: every token becomes its raw bytes, every merge a
// pair of token ids, and encoding runs on bytes with the shared BpeEncoder.
//
// Pre-tokenization is GPT-2's regex, implemented in pretokenize.cpp. Text
// that is not valid UTF-8 is still encoded (GPT-2 itself only ever saw valid
// Unicode strings): each byte that does not start a well-formed UTF-8
// character is a character of its own that is neither letter, number nor
// space. Decoding gives back the exact input bytes in every case.
#pragma once
#include <string>
#include <vector>

#include "text/bpe.h"
#include "text/tokenizer.h"

namespace ada {

class Gpt2Tokenizer : public Tokenizer {
 public:
  // Reads encoder.json and vocab.bpe; throws ada::Error naming the file and
  // the problem when one is missing or malformed.
  Gpt2Tokenizer(const std::string& encoder_json_path, const std::string& vocab_bpe_path);

  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode_token(int32_t id) const override;
  uint32_t vocab_size() const override { return uint32_t(token_bytes_.size()); }
  int32_t eot_id() const override { return eot_; }
  std::string name() const override { return "gpt2"; }
  const BpeEncoder& encoder() const { return encoder_; }

 private:
  std::vector<std::string> token_bytes_;  // id -> raw bytes
  int32_t eot_ = -1;
  BpeEncoder encoder_;
};

// GPT-2's byte-to-unicode map: the code point that stands for byte b.
uint32_t gpt2_byte_to_unicode(uint8_t b);

// Parses a JSON object whose values are all non-negative integers, as in
// encoder.json; keys are returned as UTF-8 (with \uXXXX escapes and surrogate
// pairs decoded). `what` names the source in error messages.
std::vector<std::pair<std::string, int64_t>> parse_json_string_to_int(const std::string& json,
                                                                      const std::string& what);

}  // namespace ada
