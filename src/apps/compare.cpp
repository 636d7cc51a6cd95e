// compare: train several methods on the same data, config, token budget and
// seed, then print (and save) one table: validation loss, training FLOPs,
// inference FLOPs per token and the other (non-matmul) ops per token beside
// them, passes per token, measured inference time per token, training
// tokens/s.
//
//   ./compare --methods standard,looped,ponder,pause --steps 400
//   ./compare --methods ponder,adaponder,adaponder:policy=uniform:policy-passes=auto
//
// A method spec is `name[:flag=value]...` with any flag of train_cpu
// (without the leading dashes): method options (tau=1e-3), and the run's own
// (embed-scale=latent_cot, init-from=runs/std, steps=300) for the controls. `policy-passes=auto` takes the
// average passes per token that the last learned-gate adaponder run of the
// same comparison measured on validation data: the fixed pruning policies are
// then compared with it at equal FLOPs. `policy-hist=auto` likewise takes
// that run's per-pass exit histogram (adaponder:policy=matched:policy-hist=auto:
// random tokens exit when the learned gates' tokens did). A `label=NAME` part
// names the run's folder (train/method_spec.h). Specs, labels and the cost
// measurement are shared with study (train/comparison.h).
//
// --reuse: a method whose output directory already holds a finished run (its
// `latest` checkpoint at step --steps) is not trained again; its parameters
// are loaded, validation loss and inference cost are measured again, and the
// training FLOPs and wall time come from the checkpoint's training state. A
// run that stopped part way (a checkpoint before --steps) is resumed from it.
// A comparison can then be run in pieces (several processes, or after an
// interruption) and tabulated at the end. A checkpoint trained with other
// options than the spec's (another --lr, or an adaponder run of the old
// default gate bias 4) is an error naming the first one.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "train/checkpoint.h"
#include "train/comparison.h"
#include "train/study_record.h"
#include "train/svg_plot.h"

using namespace ada;
using Bk = CpuBackend<float>;

namespace {

struct Row {
  std::string label;
  double val_loss = NAN, train_flops = 0, seconds = 0, tok_s = 0;
  InferenceCost cost;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    TrainOptions base;
    std::string methods = "standard,looped,ponder,pause";
    bool reuse = false;
    Flags flags("compare", "Train several methods on the same data and budget and tabulate the results.");
    flags.add("--methods", &methods, "comma-separated method specs, e.g. standard,ponder,adaponder:tau=1e-3");
    flags.add("--reuse", &reuse, "do not train again a method whose output directory holds a finished run");
    add_train_flags(flags, base);
    if (!flags.parse(argc, argv)) return 0;
    if (base.threads > 0) omp_set_num_threads(base.threads);
    if (!flags.was_set("--out")) base.out = "runs/compare";
    const std::string out_dir = base.out;
    std::filesystem::create_directories(out_dir);
    auto tok = run_tokenizer(base.tokenizer, base.model_config());
    Dataset data = load_data(base, *tok);

    std::vector<Row> rows;
    std::vector<RunCurves> curves;
    double learned_passes = 0;
    std::string learned_hist;
    for (const std::string& spec : split_list(methods, ',')) {
      TrainOptions o = options_for_spec(base, spec, learned_passes, learned_hist);
      o.out = out_dir + "/" + labelled_spec(spec).label;
      std::printf("\n=== %s ===\n", spec.c_str());
      const RunProgress prog = reuse ? run_progress(o.out) : RunProgress();
      check(prog.step <= o.steps, o.out + " holds a run at step " + std::to_string(prog.step) + ", past --steps " +
                                      std::to_string(o.steps));
      // a checkpoint is reused only if it was trained with this spec's options
      if (prog.step > 0)
        check_made_with("checkpoint " + prog.ckpt, read_train_options(prog.ckpt), study_record_key(spec, o), false);
      if (prog.step > 0 && prog.step < o.steps) o.resume = prog.ckpt;
      Bk be;
      CpuTrainer tr(be, o);
      Row r;
      r.label = spec;
      if (prog.step == o.steps) {
        TrainState st = load_finished(tr, prog.ckpt, o.steps);
        std::printf("reusing the finished run %s\n", prog.ckpt.c_str());
        r.val_loss = tr.evaluate(*data.val);
        r.train_flops = st.flops, r.seconds = st.seconds, r.tok_s = st.tokens / st.seconds;
      } else {
        TrainResult res = tr.run(data, true);
        r.val_loss = res.final_val_loss;
        r.train_flops = res.train_flops, r.seconds = res.seconds, r.tok_s = (res.tokens - (double)res.first_step *
            o.accum * o.batch * o.seq) / res.seconds;
      }
      r.cost = inference_cost(tr, *data.val, o);
      if (o.method == "adaponder" && o.method_opts.ada.policy == "gates") {
        learned_passes = r.cost.passes;
        learned_hist = exit_histogram(r.cost.halting, o.method_opts.ponder_steps);
        std::printf("learned exit histogram (passes 1..K+1): %s\n", learned_hist.c_str());
      }
      rows.push_back(r);
      curves.push_back(read_run_curves(o.out + "/metrics.jsonl", spec));
    }

    std::ostringstream t;
    const ModelConfig cfg = base.model_config();
    t << "config " << cfg.describe() << "; " << base.steps << " steps x " << base.accum * base.batch << " x "
      << base.seq << " tokens = " << format_count((double)base.steps * base.accum * base.batch * base.seq)
      << " training tokens, seed " << base.seed << ", data " << base.data << "\n\n";
    t << "| method | val loss | train FLOPs | inference FLOPs/token | other ops/token | passes/token | inference "
         "us/token | tokens/s | wall |\n";
    t << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (auto& r : rows) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "| %s | %.4f | %s | %s | %s | %.2f | %.2f | %.0f | %s |\n", r.label.c_str(),
                    r.val_loss, format_count(r.train_flops).c_str(), format_count(r.cost.flops).c_str(),
                    format_count(r.cost.other).c_str(), r.cost.passes, r.cost.us, r.tok_s,
                    format_duration(r.seconds).c_str());
      t << buf;
    }
    t << "\nother ops: softmaxes, norms, RoPE, SwiGLU, gates (one op per scalar add, multiply, exp, ...: "
         "model/flop_count.h); inference us/token: forward only on the " << base.eval_batches
      << " validation batches, median of 3, --threads " << omp_get_max_threads() << "\n";
    std::printf("\n%s", t.str().c_str());
    std::ofstream(out_dir + "/compare.md") << t.str();
    write_loss_plot(curves, "loss vs tokens and vs training FLOPs (" + cfg.name + ")", out_dir + "/compare.svg");
    std::printf("\ntable: %s/compare.md   plot: %s/compare.svg\n", out_dir.c_str(), out_dir.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
