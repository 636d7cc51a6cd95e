// The training loop, written once for every backend (train_cpu instantiates
// it with CpuBackend<float>, train_gpu with CudaBackend):
//   print what the run will do with its data: tokens per step, epochs, and a
//     warning when it sees its data more than once (run_plan.h)
//   for each optimizer step:
//     lr = warmup + cosine schedule; the method is told the step (its own schedules)
//     zero gradients; for each of --accum micro-batches: forward, backward(1/accum)
//     clip the global gradient norm and take an AdamW step
//     log a JSON line (and a progress line every --log-every steps, with the
//     ETA; the first one after step 1 is preceded by an estimate of the run's time)
//     evaluate on validation data every --eval-every steps (and redraw <out>/loss.svg)
//     keep a checkpoint every --save-every steps and at the end (checkpoint.h)
// A loss that becomes NaN or infinite stops the run with an error, before
// anything is saved, so the last good checkpoint stays the latest.
//
// --resume restores the parameters, the AdamW moments, the step, the
// batcher's RNG and the running totals, so the steps after a resume are the
// steps the uninterrupted run would have taken: on the CPU their losses are
// equal bit for bit (with the same thread count: the order of the floating-
// point reductions depends on it).
//
// Data parallelism (docs/scaling.md): with a communicator of W ranks, every
// rank holds the whole model and optimizer state; rank r trains on its part
// of each step's global batch of W x --batch sequences (batcher.h), the
// gradients are averaged over the ranks (one all-reduce of the gradient
// buffer) before clipping and AdamW, so every rank takes the same step; the
// step's statistics are combined over the ranks, and the validation batches
// are shared out among them. Rank 0 alone writes the log, the plot and the
// checkpoints, and prints. With one rank nothing of this runs: the step is
// the single-process step, bit for bit.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "methods/registry.h"
#include "text/dataset.h"
#include "train/batcher.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/memory_budget.h"
#include "train/metrics.h"
#include "train/options.h"
#include "train/run_plan.h"
#include "train/schedule.h"
#include "train/svg_plot.h"

namespace ada {

struct TrainResult {
  double final_train_loss = NAN, final_val_loss = NAN;
  double tokens = 0, train_flops = 0, seconds = 0;
  double train_other_flops = 0;      // non-matmul ops (model/flop_count.h)
  long long steps = 0;               // the step reached
  long long first_step = 0;          // the step this run started from (> 0 after a resume)
  std::vector<double> losses;        // training loss of each step this run took
  std::string last_checkpoint;       // directory of the last checkpoint saved, if any
};

template <class Bk>
class Trainer {
 public:
  using T = typename Bk::Real;
  using Clock = std::chrono::steady_clock;

  Trainer(Bk& be, const TrainOptions& o, Communicator& comm = single_process()) : be_(be), o_(o), comm_(comm) {
    o_.validate();
    cfg_ = o_.model_config();
    method_ = make_method<Bk>(o_.method, o_.method_opts);
    method_->set_run_seed((uint64_t)o_.seed);
    method_->set_communicator(&comm_);
    model_ = make_model(be_, cfg_, *method_);
    model_->recompute_logits = o_.recompute_logits != 0;
    model_->bf16_acts = o_.bf16_acts != 0;
    model_->init_params((uint64_t)o_.seed);
    check(!step_graphs() || method_->graph_safe(),
          "--cuda-graph 1: method '" + o_.method +
              "' reads values back from the GPU during its forward (to decide which tokens go on), so its steps "
              "cannot be recorded as a CUDA graph; run it without --cuda-graph (graphs take standard, looped, "
              "ponder, pause, cyb and ponderlm2)");
    m_ = DeviceArray<Bk, T>(be_, model_->num_params());
    v_ = DeviceArray<Bk, T>(be_, model_->num_params());
    be_.memset_zero(m_.data(), m_.size() * sizeof(T));
    be_.memset_zero(v_.data(), v_.size() * sizeof(T));
    if (!o_.resume.empty()) resume(o_.resume);
    if (!o_.init_from.empty()) {  // another run's backbone; the method's tensors and AdamW start fresh
      init_src_ = load_backbone_params(*model_, o_.init_from);
      init_dir_ = resolve_checkpoint(o_.init_from);
    }
    if (o_.out.empty()) o_.out = resumed_ ? checkpoint_run_dir(ckpt_dir_) : "runs/" + o_.method + "-" + o_.config;
    if (comm_.size() > 1) {  // every rank starts from rank 0's state (the same, unless a file changed under a rank)
      comm_.broadcast_buffer(model_->params.data(), model_->num_params(), 0);
      comm_.broadcast_buffer(m_.data(), m_.size(), 0);
      comm_.broadcast_buffer(v_.data(), v_.size(), 0);
    }
  }

  // train_gpu --cuda-graph 1 (cuda/step_graph.h): each micro-batch's forward
  // and backward are recorded and launched as one CUDA graph. Nothing else
  // changes: the same host code runs every step, the optimizer, statistics
  // and evaluation run as before.
  bool step_graphs() const {
    if constexpr (Bk::kDevice)
      return be_.step_graphs();
    else
      return false;
  }
  void graph_begin() {
    if constexpr (Bk::kDevice)
      if (be_.step_graphs()) be_.graph_begin();
  }
  void graph_end() {
    if constexpr (Bk::kDevice)
      if (be_.step_graphs()) be_.graph_end();
  }

  Model<Bk>& model() { return *model_; }
  Method<Bk>& method() { return *method_; }
  const TrainOptions& options() const { return o_; }
  // What the model is, as a checkpoint records it.
  ModelMeta model_meta(long long step) const {
    ModelMeta m;
    m.cfg = cfg_, m.method = o_.method, m.method_opts = o_.method_opts, m.step = step;
    m.tokenizer = tokenizer_spec(o_.tokenizer, cfg_);
    return m;
  }

  TrainResult run(const Dataset& data, bool verbose = true) {
    // Everything is checked before anything is written: a refused run (a
    // resume on other data, say) leaves its output directory as it was.
    // Ids outside the vocabulary would index past the embedding table.
    check_vocab(*data.train, (uint32_t)cfg_.vocab, "training data (model vocabulary " + std::to_string(cfg_.vocab) + ")");
    check_vocab(*data.val, (uint32_t)cfg_.vocab, "validation data (model vocabulary " + std::to_string(cfg_.vocab) + ")");
    if (resumed_)
      check(data.train->size() == state_.train_tokens,
            "the training data has " + std::to_string(data.train->size()) + " tokens but checkpoint " + ckpt_dir_ +
                " was trained on " + std::to_string(state_.train_tokens) + " (a different --data or --tokenizer?)");
    const int world = comm_.size();
    const bool writer = comm_.rank() == 0;  // rank 0 alone writes files and prints
    verbose = verbose && writer;
    Batcher batcher(*data.train, o_.batch, o_.seq, (uint64_t)o_.seed + 1, comm_.rank(), world);
    CosineSchedule sched{o_.lr, o_.min_lr_frac, o_.warmup, o_.steps};
    if (resumed_) batcher.rng().set_state(state_.data_rng);

    const std::string metrics_path = o_.out + "/metrics.jsonl";
    if (writer) {
      std::error_code ec;
      std::filesystem::create_directories(o_.out, ec);
      check(std::filesystem::is_directory(o_.out, ec), "cannot create the output directory " + o_.out + ": " + ec.message());
      if (resumed_) restore_metrics_log(checkpoint_run_dir(ckpt_dir_) + "/metrics.jsonl", metrics_path, state_.step);
      metrics_.open(metrics_path, resumed_);
      curves_ = resumed_ ? read_run_curves(metrics_path, run_label()) : RunCurves();  // the log so far
      curves_.label = run_label();
    }
    if (verbose) {
      std::printf("model   %s\nmethod  %s (max %d passes per token)\nbackend %s\ndata    %s\n", cfg_.describe().c_str(),
                  method_->name().c_str(), method_->max_passes(), Bk::name(), data.description.c_str());
      std::printf("unigram entropy of the training data: %.3f nats/token\n", unigram_entropy(*data.train));
      std::printf("steps %lld x %d micro-batches x %d x %d tokens, lr %.2e, out %s\n", o_.steps, o_.accum, o_.batch,
                  o_.seq, o_.lr, o_.out.c_str());
      if (world > 1)
        std::printf("ranks   %s: each step %d x %d sequences (--batch per rank), gradients averaged\n",
                    comm_.describe().c_str(), world, o_.batch);
      const RunPlan plan = plan_run(o_.steps, o_.accum, world * o_.batch, o_.seq, data.train->size());
      std::printf("%s\n", describe_plan(plan, o_.steps, o_.accum, world * o_.batch, o_.seq).c_str());
      const std::string warning = epoch_warning(plan);
      if (!warning.empty()) std::printf("%s\n", warning.c_str());
      if (resumed_) std::printf("resumed from %s at step %lld\n", ckpt_dir_.c_str(), state_.step);
      if (resumed_ && state_.world_size != world) {
        const long long before = state_.world_size * saved_batch(), now = (long long)world * o_.batch;
        if (before == now)  // the same draws from the same RNG (batcher.h): the same windows, split otherwise
          std::printf("note: checkpoint %s was trained on %d rank(s), this run has %d with the same global batch of "
                      "%lld sequences: the steps are those the uninterrupted run would have taken, up to the order "
                      "of float sums\n",
                      ckpt_dir_.c_str(), state_.world_size, world, now);
        else
          std::printf("note: checkpoint %s was trained on %d rank(s), this run has %d: the global batch changes from "
                      "%lld to %lld sequences per micro-step and the batches drawn from here on are not those the "
                      "uninterrupted run would have taken (parameters, optimizer state, step and data RNG carry on "
                      "as saved%s)\n",
                      ckpt_dir_.c_str(), state_.world_size, world, before, now,
                      before % world ? "" : ("; --batch " + std::to_string(before / world) + " keeps it").c_str());
      }
      if (!init_dir_.empty()) {
        std::printf("backbone initialised from %s (method %s, step %lld); method tensors and optimizer start fresh\n",
                    init_dir_.c_str(), init_src_.method.c_str(), init_src_.step);
        const double src_scale = init_src_.cfg.embed_scale > 0
                                     ? init_src_.cfg.embed_scale
                                     : resolve_embed_scale(init_src_.method, init_src_.cfg, init_src_.method_opts);
        if (std::abs(src_scale - model_->embed_scale) > 1e-9 * src_scale)
          std::printf("note: that run's input scale was %.6g, this run's is %.6g (set --embed-scale to keep it)\n",
                      src_scale, model_->embed_scale);
      }
      std::fflush(stdout);
    }

    TrainResult res;
    const auto t_start = Clock::now();
    const double tokens_per_step = (double)o_.accum * o_.batch * o_.seq * world;  // over every rank
    const long long first = resumed_ ? state_.step : 0;
    res.first_step = res.steps = first;
    if (resumed_) res.tokens = state_.tokens, res.train_flops = state_.flops, res.train_other_flops = state_.other_flops;
    const double seconds_before = resumed_ ? state_.seconds : 0;
    double first_step_s = 0;     // this run's first step (slower: allocation, first kernel launches)
    bool estimate_shown = false;  // the one-line estimate of this run's time, printed once
    for (long long step = first; step < o_.steps; step++) {
      const auto t0 = Clock::now();
      method_->set_step(step, o_.steps);  // methods with schedules (a function of the step: resumes exactly)
      AdamWHyper h;
      h.lr = sched.at(step);
      h.beta1 = o_.beta1, h.beta2 = o_.beta2, h.weight_decay = o_.weight_decay, h.step = step + 1;

      model_->zero_grads();
      double loss = 0, ce = 0, flops = 0, other = 0;
      StepStats last;
      auto add_stats = [&]() {
        last = method_->stats(*model_);
        loss += last.loss / o_.accum;
        ce += last.ce / o_.accum;
        flops += last.train_flops;
        other += last.train_other_flops;
      };
      for (int micro = 0; micro < o_.accum; micro++) {
        model_->arena.reset();
        Batch b = batcher.next();
        graph_begin();  // train_gpu --cuda-graph 1: forward and backward as one CUDA graph
        method_->forward(*model_, b, true);
        method_->backward(*model_, 1.0 / o_.accum);
        graph_end();
        if (micro + 1 < o_.accum) add_stats();  // read before the next micro-batch reuses the arena
      }
      if (world > 1) {  // the gradient mean over the ranks
        comm_.sum_buffer(model_->grads.data(), model_->num_params());
        be_.scale(model_->grads.data(), T(1.0 / world), model_->num_params());
      }
      // The update is queued before the last micro-batch's statistics are
      // read: on a GPU the host's wait for the loss sums then overlaps the
      // optimizer instead of stalling the stream in front of it. A non-finite
      // loss still stops the run before anything is saved (the update it
      // already made is never written to a checkpoint).
      be_.adamw_step(model_->params.data(), model_->grads.data(), m_.data(), v_.data(), model_->num_params(),
                     model_->layout.decay_count(), h, o_.clip);
      add_stats();
      if (world > 1) combine_stats(loss, ce, flops, other, last);  // the step's statistics over the ranks
      check(std::isfinite(loss), "the training loss became " + non_finite(loss) + " at step " +
                                     std::to_string(step + 1) + "; stopping (lower --lr or check the data)");
      const double gnorm = be_.last_grad_norm();
      check(std::isfinite(gnorm), "the gradient norm became " + non_finite(gnorm) + " at step " +
                                      std::to_string(step + 1) + "; stopping");
      be_.sync();
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      res.tokens += tokens_per_step;
      res.train_flops += flops;
      res.train_other_flops += other;
      res.steps = step + 1;
      res.final_train_loss = loss;
      res.losses.push_back(loss);

      double val = NAN;
      const bool last_step = step + 1 == o_.steps;
      if (last_step || (o_.eval_every > 0 && (step + 1) % o_.eval_every == 0)) {
        val = evaluate(*data.val);
        res.final_val_loss = val;
      }
      const double run_time = std::chrono::duration<double>(Clock::now() - t_start).count();
      if (step == first) first_step_s = run_time;
      const double elapsed = seconds_before + run_time;
      const double tok_s = tokens_per_step / dt;
      JsonLine j;
      j.integer("step", step + 1).num("loss", loss).num("ce", ce).num("lr", h.lr).num("grad_norm", gnorm);
      j.num("tokens", res.tokens).num("flops", res.train_flops).num("other_flops", res.train_other_flops);
      j.num("tok_per_s", tok_s).num("seconds", elapsed);
      for (auto& kv : last.halting) j.num(kv.first, kv.second);
      if (!std::isnan(val)) j.num("val_loss", val);
      if (writer) metrics_.write(j);
      curves_.tokens.push_back(res.tokens);
      curves_.flops.push_back(res.train_flops);
      curves_.loss.push_back(loss);
      if (!std::isnan(val)) {
        curves_.val_tokens.push_back(res.tokens);
        curves_.val_flops.push_back(res.train_flops);
        curves_.val_loss.push_back(val);
      }
      if (verbose && ((step + 1) % o_.log_every == 0 || step == 0 || last_step || !std::isnan(val))) {
        const long long done = step + 1 - first;
        const double eta = eta_seconds(first_step_s, run_time - first_step_s, done, o_.steps - step - 1);
        if (done > 1 && !estimate_shown && !last_step) {
          const double total = first_step_s + eta_seconds(first_step_s, run_time - first_step_s, done, o_.steps - first - 1);
          std::printf("time    about %s for this run's %lld steps (%.3g s per step over steps %lld-%lld; the first took %.3g s)\n",
                      format_duration(total).c_str(), o_.steps - first, (run_time - first_step_s) / (done - 1),
                      first + 2, step + 1, first_step_s);
          estimate_shown = true;
        }
        std::printf("step %5lld/%lld | loss %.4f", step + 1, o_.steps, loss);
        if (!std::isnan(val)) std::printf(" | val %.4f", val);
        std::printf(" | lr %.2e | norm %.2f | %s tok/s | %sFLOP | ETA %s\n", h.lr, gnorm, format_count(tok_s).c_str(),
                    format_count(res.train_flops).c_str(), format_duration(eta).c_str());
        if (step == first) memory_line("after the first step: ");
        std::fflush(stdout);
      }
      if (writer && (last_step || (o_.save_every > 0 && (step + 1) % o_.save_every == 0))) {
        TrainState st;
        st.step = step + 1;
        st.data_rng = batcher.rng().state();
        st.train_tokens = data.train->size();
        st.tokens = res.tokens, st.flops = res.train_flops, st.other_flops = res.train_other_flops, st.seconds = elapsed;
        st.schedule = sched;
        st.options = option_values(o_);
        st.world_size = world;
        res.last_checkpoint = save_checkpoint(o_.out, *model_, model_meta(step + 1), st, m_.data(), v_.data());
        if (verbose) std::printf("saved %s\n", res.last_checkpoint.c_str());
      }
      if (writer && !std::isnan(val)) plot();
    }
    res.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
    if (verbose)
      std::printf("done: %lld steps, %s tokens, %.1f s, final val loss %.4f (%s, %s/loss.svg)\n", res.steps,
                  format_count(res.tokens).c_str(), res.seconds, res.final_val_loss, metrics_.path().c_str(),
                  o_.out.c_str());
    if (verbose) memory_line("");
    return res;
  }

  // What the run holds in the backend's memory (device memory for
  // train_gpu): the state (parameters, gradients, AdamW m and v) and the
  // activations' arena at its peak (used, and reserved in blocks). Printed
  // after the first step, which sizes the arena for every later one (it
  // merges its blocks into one at the next reset), and at the end.
  void memory_line(const char* when) const {
    const double mib = 1024.0 * 1024.0,
                 state = training_state_bytes((double)model_->layout.total(), sizeof(*model_->params.data()));
    std::printf("memory  %s%.1f MiB parameters, gradients and AdamW state; activations peak %.1f MiB used, %.1f MiB "
                "reserved\n",
                when, state / mib, model_->arena.peak_used() / mib, model_->arena.peak_capacity() / mib);
  }

  // Mean next-token cross-entropy of the method's prediction on the fixed
  // validation batches (with several ranks, each evaluates its part of every
  // batch, as in training, and the sums are added over the ranks).
  double evaluate(const TokenSource& val) {
    double sums[2] = {0, 0};  // total -log q, tokens
    for (int i = 0; i < o_.eval_batches; i++) {
      model_->arena.reset();
      Batch b = eval_batch(val, o_.batch, o_.seq, i, o_.eval_batches, comm_.rank(), comm_.size());
      method_->forward(*model_, b, false);
      StepStats s = method_->stats(*model_);
      sums[0] += s.ce * s.tokens;
      sums[1] += s.tokens;
    }
    if (comm_.size() > 1) comm_.sum_host(sums, 2);
    return sums[0] / sums[1];
  }

 private:
  static std::string non_finite(double x) { return std::isnan(x) ? "NaN" : x > 0 ? "+inf" : "-inf"; }

  // The step's statistics over the ranks: FLOPs add up; the loss, the
  // cross-entropy and the method's halting statistics are means over each
  // rank's tokens, and every rank has as many (--batch x --seq, all
  // supervised), so their mean over the ranks is the global batch's.
  void combine_stats(double& loss, double& ce, double& flops, double& other, StepStats& last) {
    std::vector<double> x = {loss, ce, flops, other};
    for (auto& kv : last.halting) x.push_back(kv.second);
    comm_.sum_host(x.data(), x.size());
    const double w = comm_.size();
    loss = x[0] / w, ce = x[1] / w, flops = x[2], other = x[3];
    for (size_t i = 0; i < last.halting.size(); i++) last.halting[i].second = x[4 + i] / w;
  }

  // Loads parameters, moments and training state from a checkpoint. The
  // model was built from the options, so a checkpoint of another size or
  // method is rejected here with the field that differs.
  void resume(const std::string& path) {
    ckpt_dir_ = resolve_checkpoint(path);
    SafetensorsFile f(ckpt_dir_ + "/model.safetensors", "checkpoint");
    const ModelMeta saved = read_model_meta(f);
    load_params(*model_, model_meta(saved.step), f);
    state_ = load_train_state(be_, ckpt_dir_, model_->num_params(), saved.step, m_.data(), v_.data());
    check(state_.step < o_.steps, "checkpoint " + ckpt_dir_ + " is at step " + std::to_string(state_.step) +
                                      ", and --steps is " + std::to_string(o_.steps) + ": raise --steps to train further");
    resumed_ = true;
  }

  // --batch of the run that wrote the checkpoint resumed from (this run's if unrecorded).
  long long saved_batch() const {
    for (auto& kv : state_.options)
      if (kv.first == "batch") return std::atoll(kv.second.c_str());
    return o_.batch;
  }

  // The run's name in plots: its output directory's.
  std::string run_label() const {
    const std::filesystem::path p = std::filesystem::path(o_.out).lexically_normal();
    return p.has_filename() ? p.filename().string() : p.parent_path().filename().string();
  }
  // Redraws <out>/loss.svg from the curves kept in memory (what metrics.jsonl holds).
  void plot() { write_loss_plot({curves_}, curves_.label + " (" + o_.method + ")", o_.out + "/loss.svg"); }

  Bk& be_;
  TrainOptions o_;
  Communicator& comm_;
  ModelConfig cfg_;
  std::unique_ptr<Method<Bk>> method_;
  std::unique_ptr<Model<Bk>> model_;
  DeviceArray<Bk, T> m_, v_;  // AdamW moments, same layout as the parameters
  MetricsLog metrics_;
  RunCurves curves_;  // the loss curves of metrics.jsonl, for loss.svg
  bool resumed_ = false;
  std::string ckpt_dir_;  // the checkpoint resumed from
  std::string init_dir_;  // --init-from: the checkpoint the backbone came from
  ModelMeta init_src_;
  TrainState state_;      // its training state
};

}  // namespace ada
