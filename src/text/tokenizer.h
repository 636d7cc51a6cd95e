// The tokenizer interface, the trivial byte tokenizer, and load_tokenizer(),
// which picks an implementation from a name or a file:
//
//   "bytes"                 ByteTokenizer: 256 ids, id = byte value
//   "gpt2"                  GPT-2's BPE from data/gpt2/ (encoder.json + vocab.bpe)
//   a folder                GPT-2's BPE from FOLDER/encoder.json + FOLDER/vocab.bpe
//   a file ending in .json  GPT-2's BPE from that encoder.json + vocab.bpe beside it
//   any other file          our own byte-level BPE (format in bpe.h)
//
// Token ids are int32; text is a std::string of bytes (normally UTF-8, but
// every tokenizer here encodes ANY byte string and decodes it back exactly).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/common.h"

namespace ada {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text -> token ids. Special tokens such as "<|endoftext|>" are NOT
  // recognised in the text: it is encoded like any other text. Callers add
  // eot_id() themselves where they want a document separator.
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // The bytes of one token; throws ada::Error for an id outside the vocabulary.
  virtual std::string decode_token(int32_t id) const = 0;
  // Concatenated bytes of the tokens (may be invalid UTF-8 if the ids cut a
  // multi-byte character in two).
  std::string decode(const std::vector<int32_t>& ids) const;
  virtual uint32_t vocab_size() const = 0;
  // The end-of-text token, or -1 when the tokenizer has none.
  virtual int32_t eot_id() const { return -1; }
  // Short human-readable name: "bytes", "gpt2", "bpe4096".
  virtual std::string name() const = 0;
};

// Ids 0..255 are the bytes themselves. Useful for tests and tiny models.
class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode_token(int32_t id) const override;
  uint32_t vocab_size() const override { return 256; }
  std::string name() const override { return "bytes"; }
};

// Loads a tokenizer by name or path (see the table at the top of this file).
// Throws ada::Error naming the problem for a missing or corrupt file.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path_or_name);

// Folder used for the name "gpt2", relative to the working directory.
inline const char* const kDefaultGpt2Dir = "data/gpt2";

}  // namespace ada
