// Evaluating a model on a token stream: what `eval` reports.
//   loss        mean -log q(y) over the evaluated positions (nats/token)
//   perplexity  exp(loss)
//   bits/byte   total -log2 q(y) / the UTF-8 bytes the target tokens decode
//               to: comparable across tokenizers (end-of-text counts 0 bytes)
//   FLOPs/token the method's inference FLOPs per evaluated position, matmuls
//               and attention (StepStats::inference_flops: the forward's own,
//               except for PonderLM-2, whose figure is its sequential decode),
//               and beside them its other ops per position (softmaxes, norms,
//               ...: model/flop_count.h)
//   accuracy    the fraction of evaluated positions whose target is the
//               argmax of the method's output distribution (per_token_argmax)
//   per class   when the data has difficulty classes (a synthetic task's
//               class side file): tokens, accuracy, NLL and mean passes of
//               the positions of each class
//   halting     the method's statistics (StepStats::halting, token-weighted),
//               the passes each token used (mean and histogram) and the
//               Pearson correlation between a token's passes and its NLL: an
//               adaptive method should spend more passes on harder tokens
// The batches are either the trainer's fixed validation windows (batches > 0,
// so the loss equals the logged val_loss for the same B, T, batches) or
// every position of the stream once (batches == 0).
#pragma once
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "methods/method.h"
#include "text/tokenizer.h"
#include "text/tokens.h"
#include "train/batcher.h"

namespace ada {

struct EvalReport {
  double tokens = 0, nll_sum = 0, bytes = 0, fwd_flops = 0, fwd_other_flops = 0;
  double forward_seconds = 0;  // wall time of the method's forward and statistics (inference speed)
  std::vector<std::pair<std::string, double>> halting;  // token-weighted means of StepStats::halting
  // Per evaluated token, in evaluation order:
  std::vector<double> passes, nll;
  std::vector<uint8_t> correct;             // 1 when the argmax of the output distribution is the target
  std::vector<size_t> position;             // index of the target token in the evaluated TokenSource
  std::vector<int> cls;                     // difficulty class of the target; empty when the data has none
  std::vector<std::string> class_names;     // names of the class ids; empty when the data has none

  // The positions of one difficulty class.
  struct ClassSummary {
    std::string name;
    double tokens = 0, correct = 0, nll_sum = 0, passes_sum = 0;
    double accuracy() const { return tokens > 0 ? correct / tokens : NAN; }
    double nll() const { return tokens > 0 ? nll_sum / tokens : NAN; }
    double passes() const { return tokens > 0 ? passes_sum / tokens : NAN; }
  };

  double loss() const { return nll_sum / tokens; }
  double perplexity() const { return std::exp(loss()); }
  double bits_per_byte() const { return bytes > 0 ? nll_sum / std::log(2.0) / bytes : NAN; }
  double flops_per_token() const { return fwd_flops / tokens; }
  double other_per_token() const { return fwd_other_flops / tokens; }
  double accuracy() const {
    double c = 0;
    for (uint8_t x : correct) c += x;
    return correct.empty() ? NAN : c / correct.size();
  }
  // One summary per class name, in class-id order (classes without tokens
  // included, with 0 tokens); empty when the data has no classes.
  std::vector<ClassSummary> per_class() const {
    std::vector<ClassSummary> out(class_names.size());
    for (size_t c = 0; c < out.size(); c++) out[c].name = class_names[c];
    for (size_t i = 0; i < cls.size(); i++) {
      ClassSummary& s = out.at(cls[i]);
      s.tokens += 1;
      s.correct += correct[i];
      s.nll_sum += nll[i];
      s.passes_sum += passes[i];
    }
    return out;
  }
  double mean_passes() const {
    double s = 0;
    for (double p : passes) s += p;
    return passes.empty() ? NAN : s / passes.size();
  }
  // passes (rounded to an integer) -> number of tokens
  std::map<long long, long long> pass_histogram() const {
    std::map<long long, long long> h;
    for (double p : passes) h[std::llround(p)]++;
    return h;
  }
  // Pearson correlation of passes and NLL over tokens; NaN when either is
  // constant (e.g. a method with a fixed number of passes).
  double passes_nll_correlation() const { return pearson(passes, nll); }

  static double pearson(const std::vector<double>& x, const std::vector<double>& y) {
    const size_t n = x.size();
    if (n < 2) return NAN;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= n, my /= n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
      sxy += (x[i] - mx) * (y[i] - my);
      sxx += (x[i] - mx) * (x[i] - mx);
      syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : NAN;
  }
};

// Windows `first` .. first + count - 1 of the stream cut into consecutive
// windows of T + 1 tokens overlapping by one (window w covers tokens
// [w T, w T + T]), so that every token after the first is a target once.
inline Batch contiguous_batch(const TokenSource& src, int T, size_t first, int count) {
  Batch b;
  b.B = count, b.T = T;
  std::vector<int32_t> w(T + 1);
  for (int i = 0; i < count; i++) {
    src.read((first + i) * (size_t)T, T + 1, w.data());
    b.inputs.insert(b.inputs.end(), w.begin(), w.end() - 1);
    b.targets.insert(b.targets.end(), w.begin() + 1, w.end());
  }
  return b;
}

// tok may be null (then bytes stays 0 and bits/byte is NaN).
template <class Bk>
EvalReport evaluate_model(Model<Bk>& model, Method<Bk>& method, const TokenSource& src, const Tokenizer* tok, int B,
                          int T, int batches) {
  check(B > 0 && T > 0, "evaluation needs a positive batch and sequence length");
  check(T <= model.cfg.max_seq, "--seq " + std::to_string(T) + " is longer than the model context " +
                                    std::to_string(model.cfg.max_seq));
  check(src.size() > (size_t)T + 1, "the evaluation data has " + std::to_string(src.size()) +
                                        " tokens, fewer than one sequence of --seq " + std::to_string(T) + " + 1");
  // Bytes of every token the tokenizer knows (end-of-text is not text: 0).
  std::vector<double> token_bytes;
  if (tok) {
    token_bytes.resize(tok->vocab_size());
    for (uint32_t i = 0; i < tok->vocab_size(); i++)
      token_bytes[i] = (int32_t)i == tok->eot_id() ? 0.0 : (double)tok->decode_token((int32_t)i).size();
  }
  EvalReport r;
  const TokenClasses* classes = src.classes();
  if (classes) r.class_names = classes->names;
  std::vector<std::pair<std::string, double>> halting_sum;
  std::vector<double> nll, passes;
  std::vector<int> argmax;
  std::vector<size_t> start(B);  // where each window of the batch starts in src
  const size_t windows = (src.size() - 1) / T;
  const long long n_batches = batches > 0 ? batches : (long long)((windows + B - 1) / B);
  for (long long i = 0; i < n_batches; i++) {
    model.arena.reset();
    const Batch b = batches > 0 ? eval_batch(src, B, T, (int)i, batches)
                                : contiguous_batch(src, T, (size_t)i * B, (int)std::min<size_t>(B, windows - (size_t)i * B));
    for (int w = 0; w < b.B; w++)
      start[w] = batches > 0 ? eval_window_start(src, B, T, (int)i, batches, w) : ((size_t)i * B + w) * T;
    const auto t0 = std::chrono::steady_clock::now();
    method.forward(model, b, false);
    const StepStats s = method.stats(model);
    r.forward_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    method.per_token(model, nll, passes);
    method.per_token_argmax(model, argmax);
    r.fwd_flops += s.inference_flops();  // the decoder's cost where it differs (PonderLM-2)
    r.fwd_other_flops += s.fwd_other_flops;
    for (size_t k = 0; k < s.halting.size(); k++) {
      if (halting_sum.size() <= k) halting_sum.push_back({s.halting[k].first, 0.0});
      halting_sum[k].second += s.halting[k].second * s.tokens;
    }
    for (size_t k = 0; k < b.targets.size(); k++) {
      if (b.targets[k] < 0 || std::isnan(nll[k])) continue;
      r.tokens += 1;
      r.nll_sum += nll[k];
      r.nll.push_back(nll[k]);
      r.passes.push_back(passes[k]);
      r.correct.push_back(argmax[k] == b.targets[k]);
      const size_t pos = start[k / T] + k % T + 1;  // targets are the window's tokens 1..T
      r.position.push_back(pos);
      if (classes) r.cls.push_back(classes->ids[pos]);
      if (tok) {
        check((size_t)b.targets[k] < token_bytes.size(), "token id " + std::to_string(b.targets[k]) +
                                                             " is outside the tokenizer's vocabulary (" +
                                                             std::to_string(token_bytes.size()) + ")");
        r.bytes += token_bytes[b.targets[k]];
      }
    }
  }
  for (auto& kv : halting_sum) r.halting.push_back({kv.first, kv.second / r.tokens});
  return r;
}

// Forward FLOPs per token of the plain one-pass model on sequences of T
// tokens (what Model counts for the standard method): the yardstick of the
// "x standard" figures. Blocks: 2 x matmul parameters; attention: 4 D per
// visible key and layer, (T + 1) / 2 keys on average; head: 2 D V.
inline double standard_flops_per_token(const ModelConfig& c, int T) {
  return 2.0 * (double)c.num_block_matmul_params() + 4.0 * c.dim * c.layers * (T + 1) / 2.0 + 2.0 * c.dim * c.vocab;
}

}  // namespace ada
