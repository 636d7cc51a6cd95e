// Checkpoints: a training run on disk, in two safetensors files per step.
//
//   <out>/ckpt_<step>/model.safetensors   every parameter of the model and its
//                                         method (F32, ParamLayout names), and
//                                         in the metadata what the model is:
//                                         config, method, method options, tokenizer
//   <out>/ckpt_<step>/state.safetensors   what an exact resume needs besides the
//                                         parameters: AdamW moments, step, the
//                                         batcher's RNG, progress totals, the
//                                         schedule and every training option
//   <out>/latest                          "ckpt_<step>": the newest complete checkpoint
//
// Saving never damages an earlier checkpoint: both files are written into
// ckpt_<step>.tmp/, which is renamed to ckpt_<step> when complete, and only
// then is `latest` replaced (atomically) to name it, like llm.c's DONE marker.
// A step saved again waits as ckpt_<step>.old until `latest` is replaced, and
// the loader takes it (or the newest complete checkpoint) when a save was
// killed in between: every state on disk loads. docs/formats.md
// ("Checkpoints") lists every tensor and metadata key and the protocol's
// guarantees.
#pragma once
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "methods/registry.h"
#include "train/memory_budget.h"
#include "train/safetensors.h"
#include "train/schedule.h"

namespace ada {

constexpr int kCheckpointVersion = 1;

// What the model is (model.safetensors' metadata): enough to rebuild it.
struct ModelMeta {
  ModelConfig cfg;
  std::string method = "standard";
  MethodOptions method_opts;
  std::string tokenizer;  // the load_tokenizer() spec the run used: "bytes", "gpt2", "data/kjv_bpe4096.txt"
  long long step = 0;     // optimizer steps the parameters have had
};

// Everything besides parameters and moments that an exact resume needs.
struct TrainState {
  long long step = 0;                    // optimizer steps taken
  std::array<uint64_t, 4> data_rng{};    // the batcher's RNG after the last batch drawn
  uint64_t train_tokens = 0;             // size of the training stream (a resume checks it is the same data)
  double tokens = 0, flops = 0, seconds = 0;  // running totals of the metrics log
  double other_flops = 0;  // training non-matmul ops so far (NaN: a checkpoint written before they were counted)
  CosineSchedule schedule;
  std::vector<std::pair<std::string, std::string>> options;  // option_values() of the run (flag, exact value)
  int world_size = 1;  // ranks of the data-parallel run (metadata; 1 in checkpoints written before there were ranks)
};

std::string checkpoint_name(long long step);  // "ckpt_100"

// --resume / --ckpt argument -> checkpoint directory: an output directory
// (the checkpoint its `latest` names; when that is missing or incomplete,
// its .old copy or the newest complete checkpoint, with a note on stderr) or
// a checkpoint directory itself (or its model.safetensors). Throws naming
// what is missing.
std::string resolve_checkpoint(const std::string& path);
// The run directory a checkpoint directory belongs to (its parent).
std::string checkpoint_run_dir(const std::string& ckpt_dir);

ModelMeta read_model_meta(const SafetensorsFile& model_file);
// Throws one line naming the first field where the checkpoint differs from
// the model it is loaded into, e.g. "checkpoint run/ckpt_100/model.safetensors
// has vocabulary 8192 but the model was configured with 4096".
void check_model_meta(const ModelMeta& ckpt, const ModelMeta& want, const std::string& file);

// The training options stored in a checkpoint's state file.
std::vector<std::pair<std::string, std::string>> read_train_options(const std::string& ckpt_dir);

// Writes <out>/ckpt_<meta.step> and then <out>/latest (see the top of this
// file). params: host F32 in the layout's order; m, v: host AdamW moments of
// dtype moment_dtype (F32 or F64). Returns the checkpoint directory.
std::string write_checkpoint(const std::string& out, const ModelMeta& meta, const ParamLayout& layout,
                             const float* params, const TrainState& state, Dtype moment_dtype, const void* m,
                             const void* v);

// Before a model is built from a checkpoint's metadata: refuses at once a
// file too small for the parameters the metadata claims (a damaged or forged
// "100000 layers" builds nothing), then checks every tensor against `layout`
// (the model that metadata describes, not yet allocated): each one the model
// needs present with its exact shape and dtype F32, and none it does not have.
void check_checkpoint_size(const SafetensorsFile& model_file, const ModelConfig& cfg);
void check_checkpoint_tensors(const SafetensorsFile& model_file, const ParamLayout& layout);

// Reads a checkpoint's parameters into host F32 (layout order), after
// checking its metadata against `want` and every tensor name, shape and dtype
// against the layout.
std::vector<float> read_checkpoint_params(const SafetensorsFile& model_file, const ModelMeta& want,
                                          const ParamLayout& layout);
// --init-from: copies every backbone tensor (model.h add_backbone_params for
// `cfg`) from a checkpoint of any method into `params` (host F32, `layout`'s
// order), leaving the method's own tensors as they are. Each missing tensor
// or shape mismatch is one error naming it. Returns the source's metadata.
ModelMeta read_backbone_params(const SafetensorsFile& model_file, const ModelConfig& cfg, const ParamLayout& layout,
                               std::vector<float>& params);
// Reads state.safetensors; m and v receive the moments (n_params each).
TrainState read_train_state(const std::string& ckpt_dir, size_t n_params, long long model_step,
                            std::vector<double>& m, std::vector<double>& v);

// Resuming: the metrics log of the resumed run starts with the lines of the
// run that wrote the checkpoint, up to the checkpoint's step (lines after it,
// from a run that went on and then died, are dropped: they are computed
// again). `from` may be missing (then `to` starts empty); from == to is fine.
void restore_metrics_log(const std::string& from, const std::string& to, long long step);

// ---- backend-generic wrappers ---------------------------------------------

// Saves the model's parameters and the given moments (backend memory).
// Refuses (ada::Error) to save non-finite parameters.
template <class Bk>
std::string save_checkpoint(const std::string& out, Model<Bk>& model, const ModelMeta& meta, const TrainState& state,
                            const typename Bk::Real* m, const typename Bk::Real* v) {
  using T = typename Bk::Real;
  const size_t n = model.num_params();
  std::vector<float> p(n);
  model.be.to_host(p.data(), model.params.data(), n);
  for (auto& t : model.layout.tensors())
    for (size_t i = 0; i < t.numel; i++)
      check(std::isfinite(p[t.offset + i]), "refusing to save a checkpoint at step " + std::to_string(meta.step) +
                                                ": parameter " + t.name + " is not finite");
  std::vector<T> hm(n), hv(n);
  model.be.to_host(hm.data(), m, n);
  model.be.to_host(hv.data(), v, n);
  return write_checkpoint(out, meta, model.layout, p.data(), state, DtypeOf<T>::value, hm.data(), hv.data());
}

template <class Bk>
void load_params(Model<Bk>& model, const ModelMeta& want, const SafetensorsFile& model_file) {
  std::vector<float> p = read_checkpoint_params(model_file, want, model.layout);
  model.be.to_device(model.params.data(), p.data(), p.size());
}

// The backend-memory form of read_backbone_params (the trainer's --init-from).
template <class Bk>
ModelMeta load_backbone_params(Model<Bk>& model, const std::string& path) {
  const std::string dir = resolve_checkpoint(path);
  SafetensorsFile f(dir + "/model.safetensors", "checkpoint");
  const size_t n = model.num_params();
  std::vector<typename Bk::Real> cur(n);
  model.be.to_host(cur.data(), model.params.data(), n);
  std::vector<float> p(cur.begin(), cur.end());
  const ModelMeta src = read_backbone_params(f, model.cfg, model.layout, p);
  for (size_t i = 0; i < n; i++) cur[i] = (typename Bk::Real)p[i];
  model.be.to_device(model.params.data(), cur.data(), n);
  return src;
}

// Loads state.safetensors into the moments m, v (backend memory).
template <class Bk>
TrainState load_train_state(Bk& be, const std::string& ckpt_dir, size_t n_params, long long model_step,
                            typename Bk::Real* m, typename Bk::Real* v) {
  std::vector<double> hm, hv;
  TrainState st = read_train_state(ckpt_dir, n_params, model_step, hm, hv);
  be.to_device(m, hm.data(), n_params);
  be.to_device(v, hv.data(), n_params);
  return st;
}

// A model and its method rebuilt from a checkpoint (eval, generate).
template <class Bk>
struct CheckpointModel {
  std::string dir;  // the checkpoint directory
  ModelMeta meta;
  std::unique_ptr<Method<Bk>> method;
  std::unique_ptr<Model<Bk>> model;
};

template <class Bk>
CheckpointModel<Bk> load_checkpoint_model(Bk& be, const std::string& path, const std::string& method_overrides = "") {
  CheckpointModel<Bk> r;
  r.dir = resolve_checkpoint(path);
  SafetensorsFile f(r.dir + "/model.safetensors", "checkpoint");
  const ModelMeta saved = read_model_meta(f);  // every number within its range
  check_checkpoint_size(f, saved.cfg);
  r.meta = saved;  // the overrides change behaviour only; the parameters must still match `saved`
  if (!method_overrides.empty()) apply_method_overrides(r.meta.method_opts, method_overrides);
  r.method = make_method<Bk>(r.meta.method, r.meta.method_opts);
  // The tensors against the model the metadata describes, before allocating it.
  const ParamLayout layout = model_layout(r.meta.cfg, *r.method);
  check_checkpoint_tensors(f, layout);
  check_memory(model_bytes(r.meta.cfg, (double)layout.total(), sizeof(typename Bk::Real), false),
               "the model of checkpoint " + r.dir, r.meta.cfg.describe());
  r.model = make_model(be, r.meta.cfg, *r.method);
  load_params(*r.model, saved, f);
  return r;
}

}  // namespace ada
