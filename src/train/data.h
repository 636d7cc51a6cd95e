// Loading the tokenizer and the training / validation token streams of a run.
#pragma once
#include <memory>
#include <string>

#include "text/dataset.h"
#include "text/tokenizer.h"

namespace ada {

struct TrainOptions;
struct ModelConfig;

// The tokenizer a run uses: --tokenizer, or when it is "auto", GPT-2 for
// models with a GPT-2-sized vocabulary and the shipped 4096-token BPE of the
// corpus otherwise. Checks that the model's vocabulary can hold its ids.
std::unique_ptr<Tokenizer> run_tokenizer(const std::string& flag, const ModelConfig& cfg);
// The load_tokenizer() spec that --tokenizer `flag` stands for ("auto"
// resolved as above); checkpoints record it.
std::string tokenizer_spec(const std::string& flag, const ModelConfig& cfg);

// Train and validation streams for --data (text or shards).
Dataset load_data(const TrainOptions& o, const Tokenizer& tok);

// Entropy of the unigram distribution of the tokens, in nats per token: the
// loss of the best model that ignores context (a trained LM must go far below).
double unigram_entropy(const TokenSource& src);

}  // namespace ada
