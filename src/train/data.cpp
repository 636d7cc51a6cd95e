#include "train/data.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "train/options.h"

namespace ada {

DataSplit load_data(const TrainOptions& o) {
  check(o.tokenizer == "bytes", "tokenizer '" + o.tokenizer + "' is not available yet (only 'bytes')");
  std::ifstream f(o.data, std::ios::binary);
  check(f.good(), "cannot open training data " + o.data);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  check(!text.empty(), "training data " + o.data + " is empty");
  std::vector<int32_t> ids(text.begin(), text.end());
  for (auto& t : ids) t &= 0xFF;
  const size_t nval = (size_t)(ids.size() * o.val_fraction);
  DataSplit d;
  d.val = std::make_unique<VectorTokens>(std::vector<int32_t>(ids.end() - nval, ids.end()), 256);
  d.train = std::make_unique<VectorTokens>(std::vector<int32_t>(ids.begin(), ids.end() - nval), 256);
  d.description = o.data + " as bytes: " + std::to_string(d.train->size()) + " train / " +
                  std::to_string(d.val->size()) + " val tokens";
  return d;
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
