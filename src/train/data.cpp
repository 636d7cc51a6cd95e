#include "train/data.h"

#include <cmath>
#include <unordered_map>
#include <vector>

#include "train/options.h"

namespace ada {

std::string tokenizer_spec(const std::string& flag, const ModelConfig& cfg) {
  if (flag == "auto") return cfg.vocab >= 50257 ? "gpt2" : "data/kjv_bpe4096.txt";
  return flag;
}

std::unique_ptr<Tokenizer> run_tokenizer(const std::string& flag, const ModelConfig& cfg) {
  const std::string name = tokenizer_spec(flag, cfg);
  auto tok = load_tokenizer(name);
  check(tok->vocab_size() <= (uint32_t)cfg.vocab,
        "tokenizer " + name + " has " + std::to_string(tok->vocab_size()) + " tokens but the model's vocabulary is " +
            std::to_string(cfg.vocab) + " (pass --vocab " + std::to_string(tok->vocab_size()) +
            " or more, or a smaller tokenizer, e.g. --tokenizer bytes with --vocab 256)");
  return tok;
}

Dataset load_data(const TrainOptions& o, const Tokenizer& tok) {
  return open_dataset(o.data, &tok, o.val_fraction);
}

double unigram_entropy(const TokenSource& src) {
  std::unordered_map<int32_t, double> counts;
  std::vector<int32_t> buf(1 << 16);
  for (size_t i = 0; i < src.size(); i += buf.size()) {
    const size_t n = std::min(buf.size(), src.size() - i);
    src.read(i, n, buf.data());
    for (size_t j = 0; j < n; j++) counts[buf[j]] += 1;
  }
  double H = 0, total = (double)src.size();
  for (auto& kv : counts) {
    const double p = kv.second / total;
    H -= p * std::log(p);
  }
  return H;
}

}  // namespace ada
