// The training loop, written once for every backend (train_cpu instantiates
// it with CpuBackend<float>, train_gpu with CudaBackend):
//   for each optimizer step:
//     lr = warmup + cosine schedule
//     zero gradients; for each of --accum micro-batches: forward, backward(1/accum)
//     clip the global gradient norm and take an AdamW step
//     log a JSON line (and a progress line every --log-every steps)
//     evaluate on validation data every --eval-every steps
// A loss that becomes NaN or infinite stops the run with an error.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "methods/registry.h"
#include "train/batcher.h"
#include "train/data.h"
#include "train/metrics.h"
#include "train/options.h"
#include "train/schedule.h"

namespace ada {

struct TrainResult {
  double final_train_loss = NAN, final_val_loss = NAN;
  double tokens = 0, train_flops = 0, seconds = 0;
  long long steps = 0;
};

template <class Bk>
class Trainer {
 public:
  using T = typename Bk::Real;
  using Clock = std::chrono::steady_clock;

  Trainer(Bk& be, const TrainOptions& o) : be_(be), o_(o) {
    o_.validate();
    cfg_ = o_.model_config();
    method_ = make_method<Bk>(o_.method, o_.method_opts);
    model_ = make_model(be_, cfg_, *method_);
    model_->init_params((uint64_t)o_.seed);
    m_ = DeviceArray<Bk, T>(be_, model_->num_params());
    v_ = DeviceArray<Bk, T>(be_, model_->num_params());
    be_.memset_zero(m_.data(), m_.size() * sizeof(T));
    be_.memset_zero(v_.data(), v_.size() * sizeof(T));
    if (o_.out.empty()) o_.out = "runs/" + o_.method + "-" + o_.config;
  }

  Model<Bk>& model() { return *model_; }
  Method<Bk>& method() { return *method_; }

  TrainResult run(const Dataset& data, bool verbose = true) {
    std::filesystem::create_directories(o_.out);
    metrics_.open(o_.out + "/metrics.jsonl", false);
    if (data.train->vocab_bound())
      check(data.train->vocab_bound() <= (uint32_t)cfg_.vocab,
            "the data's vocabulary (" + std::to_string(data.train->vocab_bound()) + ") is larger than the model's --vocab " +
                std::to_string(cfg_.vocab));
    Batcher batcher(*data.train, o_.batch, o_.seq, (uint64_t)o_.seed + 1);
    CosineSchedule sched{o_.lr, o_.min_lr_frac, o_.warmup, o_.steps};
    if (verbose) {
      std::printf("model   %s\nmethod  %s (max %d passes per token)\nbackend %s\ndata    %s\n", cfg_.describe().c_str(),
                  method_->name().c_str(), method_->max_passes(), Bk::name(), data.description.c_str());
      std::printf("unigram entropy of the training data: %.3f nats/token\n", unigram_entropy(*data.train));
      std::printf("steps %lld x %d micro-batches x %d x %d tokens, lr %.2e, out %s\n", o_.steps, o_.accum, o_.batch,
                  o_.seq, o_.lr, o_.out.c_str());
      std::fflush(stdout);
    }

    TrainResult res;
    const auto t_start = Clock::now();
    double tokens_per_step = (double)o_.accum * o_.batch * o_.seq;
    for (long long step = 0; step < o_.steps; step++) {
      const auto t0 = Clock::now();
      AdamWHyper h;
      h.lr = sched.at(step);
      h.beta1 = o_.beta1, h.beta2 = o_.beta2, h.weight_decay = o_.weight_decay, h.step = step + 1;

      model_->zero_grads();
      double loss = 0, ce = 0, flops = 0;
      StepStats last;
      for (int micro = 0; micro < o_.accum; micro++) {
        model_->arena.reset();
        Batch b = batcher.next();
        method_->forward(*model_, b, true);
        method_->backward(*model_, 1.0 / o_.accum);
        last = method_->stats(*model_);
        loss += last.loss / o_.accum;
        ce += last.ce / o_.accum;
        flops += last.train_flops;
      }
      check(std::isfinite(loss), "the training loss became " + std::to_string(loss) + " at step " +
                                     std::to_string(step + 1) + "; stopping (lower --lr or check the data)");
      be_.adamw_step(model_->params.data(), model_->grads.data(), m_.data(), v_.data(), model_->num_params(),
                     model_->layout.decay_count(), h, o_.clip);
      const double gnorm = be_.last_grad_norm();
      check(std::isfinite(gnorm), "the gradient norm became " + std::to_string(gnorm) + " at step " +
                                      std::to_string(step + 1) + "; stopping");
      be_.sync();
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      res.tokens += tokens_per_step;
      res.train_flops += flops;
      res.steps = step + 1;
      res.final_train_loss = loss;

      double val = NAN;
      const bool last_step = step + 1 == o_.steps;
      if (last_step || (o_.eval_every > 0 && (step + 1) % o_.eval_every == 0)) {
        val = evaluate(*data.val);
        res.final_val_loss = val;
      }
      const double elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
      const double tok_s = tokens_per_step / dt;
      JsonLine j;
      j.integer("step", step + 1).num("loss", loss).num("ce", ce).num("lr", h.lr).num("grad_norm", gnorm);
      j.num("tokens", res.tokens).num("flops", res.train_flops).num("tok_per_s", tok_s).num("seconds", elapsed);
      for (auto& kv : last.halting) j.num(kv.first, kv.second);
      if (!std::isnan(val)) j.num("val_loss", val);
      metrics_.write(j);
      if (verbose && ((step + 1) % o_.log_every == 0 || step == 0 || last_step || !std::isnan(val))) {
        const double eta = elapsed / (step + 1) * (o_.steps - step - 1);
        std::printf("step %5lld/%lld | loss %.4f", step + 1, o_.steps, loss);
        if (!std::isnan(val)) std::printf(" | val %.4f", val);
        std::printf(" | lr %.2e | norm %.2f | %s tok/s | %sFLOP | ETA %s\n", h.lr, gnorm, format_count(tok_s).c_str(),
                    format_count(res.train_flops).c_str(), format_duration(eta).c_str());
        std::fflush(stdout);
      }
    }
    res.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
    if (verbose)
      std::printf("done: %lld steps, %s tokens, %.1f s, final val loss %.4f (%s)\n", res.steps,
                  format_count(res.tokens).c_str(), res.seconds, res.final_val_loss, metrics_.path().c_str());
    return res;
  }

  // Mean next-token cross-entropy of the method's prediction on the fixed
  // validation batches.
  double evaluate(const TokenSource& val) {
    double total = 0, count = 0;
    for (int i = 0; i < o_.eval_batches; i++) {
      model_->arena.reset();
      Batch b = eval_batch(val, o_.batch, o_.seq, i, o_.eval_batches);
      method_->forward(*model_, b, false);
      StepStats s = method_->stats(*model_);
      total += s.ce * s.tokens;
      count += s.tokens;
    }
    return total / count;
  }

 private:
  Bk& be_;
  TrainOptions o_;
  ModelConfig cfg_;
  std::unique_ptr<Method<Bk>> method_;
  std::unique_ptr<Model<Bk>> model_;
  DeviceArray<Bk, T> m_, v_;  // AdamW moments, same layout as the parameters
  MetricsLog metrics_;
};

}  // namespace ada
