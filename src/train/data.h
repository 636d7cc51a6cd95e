// Loading the training and validation token streams for a run.
#pragma once
#include <memory>
#include <string>

#include "text/tokens.h"

namespace ada {

struct TrainOptions;

struct DataSplit {
  std::unique_ptr<TokenSource> train, val;
  std::string description;  // one line for the startup table
};

DataSplit load_data(const TrainOptions& o);

// Entropy of the unigram distribution of the tokens, in nats per token: the
// loss of the best model that ignores context (a trained LM must go far below).
double unigram_entropy(const TokenSource& src);

}  // namespace ada
