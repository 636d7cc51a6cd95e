// Sampling text from a model: the prompt is fed through the method's
// KV-cached decoder, then tokens are drawn one at a time and their text is
// handed out as soon as it is whole UTF-8 (a character split across two
// tokens is held back until its last byte arrives).
//   temperature 0   greedy: the most likely token
//   temperature t   p_i^(1/t), renormalised over the top_k most likely tokens
//                   (top_k 0: all of them)
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "core/rng.h"
#include "methods/method.h"
#include "text/tokenizer.h"
#include "text/tokens.h"
#include "text/utf8.h"

namespace ada {

inline int sample_token(const std::vector<double>& probs, double temperature, int top_k, Rng& rng) {
  const int V = (int)probs.size();
  check(V > 0, "cannot sample from an empty distribution");
  if (temperature <= 0) return (int)(std::max_element(probs.begin(), probs.end()) - probs.begin());
  std::vector<int> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  int k = top_k > 0 && top_k < V ? top_k : V;
  // Highest first; ties broken by id so the draw depends on the seed only.
  auto more_likely = [&](int a, int b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); };
  if (k < V) std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), more_likely);
  // p^(1/t) in log space, relative to the largest kept probability.
  double top = 0;
  for (int i = 0; i < k; i++) top = std::max(top, probs[idx[i]]);
  check(top > 0, "the model's next-token distribution is all zeros (a NaN in the model?)");
  std::vector<double> w(k);
  double sum = 0;
  for (int i = 0; i < k; i++) {
    const double p = probs[idx[i]];
    w[i] = p > 0 ? std::exp((std::log(p) - std::log(top)) / temperature) : 0.0;
    sum += w[i];
  }
  double u = rng.uniform() * sum;
  for (int i = 0; i < k; i++) {
    u -= w[i];
    if (u < 0) return idx[i];
  }
  return idx[k - 1];
}

// Turns a stream of byte chunks into complete UTF-8: push() returns what can
// be printed now; an unfinished multi-byte character at the end is kept for
// the next push. Bytes that can never form a character are passed through.
class Utf8Stream {
 public:
  std::string push(const std::string& bytes) {
    pending_ += bytes;
    size_t cut = pending_.size();
    for (size_t k = 1; k <= 3 && k <= pending_.size(); k++) {
      const unsigned char c = (unsigned char)pending_[pending_.size() - k];
      if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for the lead
      const size_t need = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 1;
      if (need > k) cut = pending_.size() - k;  // the character is not complete yet
      break;
    }
    std::string out = pending_.substr(0, cut);
    pending_.erase(0, cut);
    return out;
  }
  std::string finish() {
    std::string out;
    out.swap(pending_);
    return out;
  }

 private:
  std::string pending_;
};

struct GenerateOptions {
  int max_tokens = 100;
  double temperature = 0.8;
  int top_k = 40;
  uint64_t seed = 1;
  bool stop_at_eot = true;  // end when the model produces the end-of-text token
};

struct GenerateResult {
  std::vector<int32_t> prompt;  // prompt tokens fed (end-of-text first, when the tokenizer has one)
  std::vector<int32_t> tokens;  // generated tokens
  std::string text;             // their decoded bytes
  double prompt_seconds = 0, seconds = 0;  // time to feed the prompt; to generate
  double flops = 0;             // forward FLOPs of every token fed to the decoder
  int fed = 0;                  // tokens fed to the decoder
  double passes_sum = 0;        // passes behind each generated token's distribution
  double tokens_per_second() const { return seconds > 0 ? tokens.size() / seconds : NAN; }
  double flops_per_token() const { return fed ? flops / fed : NAN; }
  double mean_passes() const { return tokens.empty() ? NAN : passes_sum / tokens.size(); }
};

// Checks the prompt and tokenizes it as training saw documents: end-of-text
// first (when the tokenizer has one), then the text. Every id must be in the
// model's vocabulary `vocab` (a tokenizer file can hold more ids than it says).
inline std::vector<int32_t> prompt_tokens(const std::string& prompt, const Tokenizer& tok, int max_tokens, int context,
                                          int vocab) {
  const size_t bad = utf8_find_invalid(prompt);
  if (bad != std::string::npos) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", (unsigned char)prompt[bad]);
    fail("the prompt is not valid UTF-8: byte " + std::string(hex) + " at byte offset " + std::to_string(bad));
  }
  std::vector<int32_t> ids;
  if (tok.eot_id() >= 0) ids.push_back(tok.eot_id());
  const std::vector<int32_t> body = tok.encode(prompt);
  ids.insert(ids.end(), body.begin(), body.end());
  check(!ids.empty(), "the prompt is empty (and tokenizer " + tok.name() + " has no end-of-text token to start from)");
  const size_t out = first_outside_vocab(ids.data(), ids.size(), (uint32_t)vocab);
  if (out < ids.size())
    fail("the prompt's token " + std::to_string(out) + " (id " + std::to_string(ids[out]) + ", from tokenizer " +
         tok.name() + ") is outside the model's vocabulary (size " + std::to_string(vocab) + ")");
  check(max_tokens >= 1, "--max-tokens must be positive (got " + std::to_string(max_tokens) + ")");
  check((long long)ids.size() + max_tokens <= context,
        "the prompt (" + std::to_string(ids.size()) + " tokens) plus --max-tokens " + std::to_string(max_tokens) +
            " is longer than the model context " + std::to_string(context));
  return ids;
}

// on_text receives the generated text piece by piece, as whole characters.
template <class Bk>
GenerateResult generate(Model<Bk>& model, Method<Bk>& method, const Tokenizer& tok, const std::string& prompt,
                        const GenerateOptions& o, const std::function<void(const std::string&)>& on_text) {
  using Clock = std::chrono::steady_clock;
  check(o.temperature >= 0, "--temperature must be >= 0 (0 = greedy)");
  check(o.top_k >= 0, "--top-k must be >= 0 (0 = no limit)");
  check(tok.vocab_size() <= (uint32_t)model.cfg.vocab,
        "tokenizer " + tok.name() + " has " + std::to_string(tok.vocab_size()) + " tokens but the model's vocabulary is " +
            std::to_string(model.cfg.vocab));
  GenerateResult r;
  r.prompt = prompt_tokens(prompt, tok, o.max_tokens, model.cfg.max_seq, model.cfg.vocab);
  auto dec = method.decoder(model, (int)r.prompt.size() + o.max_tokens);
  Rng rng(o.seed);
  Utf8Stream stream;
  auto t0 = Clock::now();
  const std::vector<double>* probs = nullptr;
  for (int32_t id : r.prompt) probs = &dec->step(id);
  r.prompt_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  t0 = Clock::now();
  for (int i = 0; i < o.max_tokens; i++) {
    r.passes_sum += dec->passes_last();
    // Ids the tokenizer does not know (a model vocabulary padded beyond it) are never drawn.
    std::vector<double> p(probs->begin(), probs->begin() + tok.vocab_size());
    const int32_t next = sample_token(p, o.temperature, o.top_k, rng);
    if (o.stop_at_eot && next == tok.eot_id()) {
      r.passes_sum -= dec->passes_last();
      break;
    }
    r.tokens.push_back(next);
    const std::string piece = tok.decode_token(next);
    r.text += piece;
    const std::string ready = stream.push(piece);
    if (!ready.empty()) on_text(ready);
    if (i + 1 < o.max_tokens) probs = &dec->step(next);
  }
  const std::string rest = stream.finish();
  if (!rest.empty()) on_text(rest);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.fed = dec->length();
  r.flops = dec->flops();
  return r;
}

}  // namespace ada
