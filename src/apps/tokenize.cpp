// tokenize: text files -> llm.c token shards (and, optionally, train a BPE).
//
//   ./tokenize --tokenizer gpt2 --out-dir data/kjv_gpt2 data/kjv.txt
//   ./tokenize --train-bpe 4096 --bpe-out data/kjv_bpe4096.txt --out-dir data/kjv_bpe data/kjv.txt
//
// Each input file is one document: its tokens are [eot] + encode(text) when
// the tokenizer has an end-of-text token. All documents are concatenated; the
// last --val-fraction of the tokens become the validation split. Output, in
// llm.c's naming: DIR/<name>_val_000000.bin, DIR/<name>_train_000000.bin,
// DIR/<name>_train_000001.bin, ... with at most --shard-tokens tokens each.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "core/common.h"
#include "core/config.h"
#include "text/bpe.h"
#include "text/dataset.h"
#include "text/shards.h"
#include "text/tokenizer.h"
#include "train/flags.h"

using namespace ada;

namespace {

const char* kUsage = R"(usage: tokenize --tokenizer {bytes|gpt2|path/to/bpe.txt} --out-dir DIR [options] input.txt [more.txt ...]
       tokenize --train-bpe N --bpe-out PATH [--out-dir DIR] [options] input.txt [more.txt ...]

Tokenizes UTF-8 text files into llm.c token shards: DIR/<name>_val_000000.bin,
DIR/<name>_train_000000.bin, ... Each input file is one document (preceded by
<|endoftext|> when the tokenizer has it); the last --val-fraction of all tokens
is the validation split.

options:
  --tokenizer T       bytes, gpt2 (data/gpt2), a GPT-2 folder, or an ada-bpe file
  --train-bpe N       train a byte-level BPE with N tokens (>= 256) on the inputs
                      and use it as the tokenizer (instead of --tokenizer)
  --bpe-out PATH      where to save the trained BPE (required with --train-bpe)
  --out-dir DIR       output folder, created if missing (optional with --train-bpe)
  --name NAME         shard name prefix (default: the first input's file name
                      without extension)
  --val-fraction F    fraction of tokens for validation, in [0, 1) (default 0.1)
  --shard-tokens N    maximum tokens per shard file (default 100000000)
  --help              show this help
)";

struct Options {
  std::string tokenizer, bpe_out, out_dir, name;
  uint32_t train_bpe = 0;
  double val_fraction = 0.1;
  size_t shard_tokens = 100000000;
  std::vector<std::string> inputs;
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (a.size() < 2 || a[0] != '-') {  // not a flag: an input file
      o.inputs.push_back(a);
      continue;
    }
    static const char* const kFlags[] = {"--tokenizer", "--train-bpe", "--bpe-out",     "--out-dir",
                                         "--name",      "--val-fraction", "--shard-tokens"};
    check(std::find(std::begin(kFlags), std::end(kFlags), a) != std::end(kFlags),
          "unknown flag " + a + " (see --help)");
    check(i + 1 < argc, a + " needs a value (see --help)");
    const std::string v = argv[++i];
    if (a == "--tokenizer") o.tokenizer = v;
    else if (a == "--train-bpe") o.train_bpe = (uint32_t)parse_integer(a, v, 256, kMaxVocab);
    else if (a == "--bpe-out") o.bpe_out = v;
    else if (a == "--out-dir") o.out_dir = v;
    else if (a == "--name") o.name = v;
    else if (a == "--val-fraction") o.val_fraction = parse_number(a, v);
    else o.shard_tokens = (size_t)parse_integer(a, v, 1, INT32_MAX);  // --shard-tokens
  }
  check(!o.inputs.empty(), "no input text files given (see --help)");
  const bool training = o.train_bpe > 0 || !o.bpe_out.empty();
  if (training) {
    check(o.tokenizer.empty(), "--tokenizer and --train-bpe exclude each other: the trained BPE is the tokenizer");
    check(o.train_bpe >= 256, "--train-bpe needs a vocabulary size of at least 256 (the bytes)");
    check(!o.bpe_out.empty(), "--train-bpe needs --bpe-out PATH to save the BPE to");
  } else {
    check(!o.tokenizer.empty(), "--tokenizer is required (bytes, gpt2 or an ada-bpe file; see --help)");
    check(!o.out_dir.empty(), "--out-dir is required (see --help)");
  }
  check(o.val_fraction >= 0 && o.val_fraction < 1, "--val-fraction must be in [0, 1)");
  check(o.shard_tokens >= 1 && o.shard_tokens <= size_t(INT32_MAX),
        "--shard-tokens must be between 1 and " + std::to_string(INT32_MAX));
  if (o.name.empty()) {
    std::string base = o.inputs[0].substr(o.inputs[0].rfind('/') + 1);  // npos + 1 == 0
    const size_t dot = base.rfind('.');
    o.name = (dot == std::string::npos || dot == 0) ? base : base.substr(0, dot);
  }
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// mkdir -p
void make_dirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      const std::string part = dir.substr(0, i);
      struct stat st;
      if (::stat(part.c_str(), &st) == 0) {
        check(S_ISDIR(st.st_mode), "output path exists and is not a directory: " + part);
      } else {
        check(::mkdir(part.c_str(), 0755) == 0, "cannot create directory " + part);
      }
    }
  }
}

std::string shard_path(const Options& o, const char* split, size_t index) {
  char num[16];
  std::snprintf(num, sizeof(num), "%06zu", index);
  return o.out_dir + "/" + o.name + "_" + split + "_" + num + ".bin";
}

// Writes tokens [begin, end) as shards of the split; removes higher-numbered
// shards of the same name left over from an earlier, larger run (they would
// otherwise be picked up by a glob).
void write_split(const Options& o, const char* split, const std::vector<int32_t>& tokens, size_t begin,
                 size_t end, uint32_t vocab) {
  size_t index = 0;
  for (size_t start = begin; start < end; start += o.shard_tokens, ++index) {
    const size_t n = std::min(o.shard_tokens, end - start);
    const std::string path = shard_path(o, split, index);
    write_shard(path, tokens.data() + start, n, vocab);
    std::printf("wrote %s (%zu tokens)\n", path.c_str(), n);
  }
  for (;; ++index) {
    const std::string stale = shard_path(o, split, index);
    struct stat st;
    if (::stat(stale.c_str(), &st) != 0) break;
    check(std::remove(stale.c_str()) == 0, "cannot remove stale shard " + stale);
    std::printf("removed stale %s\n", stale.c_str());
  }
}

int run(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  std::vector<std::string> texts;
  for (const std::string& path : o.inputs) texts.push_back(read_text_file(path));

  std::unique_ptr<Tokenizer> tokenizer;
  if (o.train_bpe > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string all;
    for (const std::string& t : texts) all += t;
    std::vector<BpeMerge> merges = train_bpe(all, o.train_bpe);
    save_bpe(o.bpe_out, merges);
    std::printf("trained BPE: %zu merges (vocabulary %zu) on %zu bytes in %.2f s -> %s\n", merges.size(),
                256 + merges.size(), all.size(), seconds_since(t0), o.bpe_out.c_str());
    if (merges.size() + 256 < o.train_bpe) {
      std::printf("note: the text has too few repeated pairs for %u tokens\n", o.train_bpe);
    }
    tokenizer = std::make_unique<BpeTokenizer>(std::move(merges));
  } else {
    tokenizer = load_tokenizer(o.tokenizer);
  }
  if (o.out_dir.empty()) return 0;  // only training the BPE
  make_dirs(o.out_dir);

  std::vector<int32_t> tokens;
  const auto t_all = std::chrono::steady_clock::now();
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> doc = tokenize_document(texts[i], *tokenizer);
    tokens.insert(tokens.end(), doc.begin(), doc.end());
    const double s = seconds_since(t0);
    std::printf("%s: %zu bytes -> %zu tokens in %.2f s (%.2fM tokens/s)\n", o.inputs[i].c_str(), texts[i].size(),
                doc.size(), s, doc.size() / std::max(s, 1e-9) / 1e6);
    std::fflush(stdout);
  }
  const size_t n_val = num_val_tokens(tokens.size(), o.val_fraction);
  const uint32_t vocab = tokenizer->vocab_size();
  write_split(o, "val", tokens, tokens.size() - n_val, tokens.size(), vocab);
  write_split(o, "train", tokens, 0, tokens.size() - n_val, vocab);
  const double s = seconds_since(t_all);
  std::printf("%s tokenizer (vocabulary %u): %zu tokens (%zu train, %zu val) in %.2f s, %.2fM tokens/s\n",
              tokenizer->name().c_str(), vocab, tokens.size(), tokens.size() - n_val, n_val, s,
              tokens.size() / std::max(s, 1e-9) / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
