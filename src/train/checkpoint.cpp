// Checkpoint files: what goes into model.safetensors and state.safetensors,
// how a save stays atomic, and the checks that make a mismatched or damaged
// checkpoint fail with one clear message. Layout in checkpoint.h; every key
// and tensor in docs/formats.md.
#include "train/checkpoint.h"

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "train/atomic_file.h"
#include "core/format.h"
#include "core/json.h"

namespace fs = std::filesystem;

namespace ada {

namespace {

const char* const kFormat = "ada-checkpoint";

// Doubles as text that reads back to the same bits.
std::string exact(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

bool file_exists(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Both files there: a save renames a checkpoint directory into place only
// when complete, so this holds for every ckpt_<step> a save made.
bool complete_checkpoint(const std::string& dir) {
  return file_exists(dir + "/model.safetensors") && file_exists(dir + "/state.safetensors");
}

// The step of a directory name "ckpt_<step>" (suffix "") or "ckpt_<step>.old"
// (suffix ".old"); -1 for any other name.
long long checkpoint_step(const std::string& name, const std::string& suffix) {
  if (name.size() <= 5 + suffix.size() || name.compare(0, 5, "ckpt_") != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(5, name.size() - 5 - suffix.size());
  if (digits.size() > 15 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

// The complete checkpoint of a run directory with the highest step, among its
// ckpt_<step> and ckpt_<step>.old directories (ckpt_<step> first at equal
// steps); "" when there is none.
std::string newest_complete_checkpoint(const std::string& dir) {
  std::string best;
  long long best_step = -1;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    for (const char* suffix : {"", ".old"}) {
      const long long step = checkpoint_step(name, suffix);
      const bool better = step > best_step || (step == best_step && *suffix == 0);
      if (step >= 0 && better && complete_checkpoint(dir + "/" + name)) best = dir + "/" + name, best_step = step;
    }
  }
  return best;
}

// Removes a checkpoint directory file by file (a crash can stop it between
// two files: the loader never takes a directory with a file missing).
void remove_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    files.push_back(it->path());
  for (auto& f : files) {
    fs::remove_all(f, ec);
    file_op_done();
  }
  fs::remove(dir, ec);
  file_op_done();
}

// Removes every ckpt_*<suffix> directory of a run directory (".tmp": what a
// killed save left; ".old": steps re-saved).
void remove_leftovers(const std::string& out, const std::string& suffix) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::directory_iterator(out, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, 5, "ckpt_") == 0 && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 && it->is_directory(ec))
      found.push_back(out + "/" + name);
  }
  for (auto& d : found) remove_checkpoint_dir(d);
}

// An integer metadata value in [lo, hi]: decimal digits only, as the writer prints them.
long long parse_int(const SafetensorsFile& f, const std::string& key, long long lo = LLONG_MIN,
                    long long hi = LLONG_MAX) {
  return parse_integer("checkpoint " + f.path() + ": metadata " + key, f.meta(key), lo, hi);
}

double parse_double(const SafetensorsFile& f, const std::string& key) {
  return parse_number("checkpoint " + f.path() + ": metadata " + key, f.meta(key));
}

// Method options as (flag without "--", value), through the flags that
// declare them, so a new method option is saved without touching this file.
std::vector<std::pair<std::string, std::string>> method_option_values(MethodOptions& o) {
  Flags f("checkpoint", "");
  add_method_flags(f, o);
  return f.values();
}

// Checks format and kind ("model" / "state") of a checkpoint file.
void check_format(const SafetensorsFile& f, const std::string& kind) {
  auto it = f.metadata().find("format");
  check(it != f.metadata().end() && it->second == kFormat,
        "checkpoint " + f.path() + " is not an ada checkpoint (its metadata has no format \"" + kFormat + "\")");
  const long long version = parse_int(f, "format_version");
  check(version >= 1 && version <= kCheckpointVersion,
        "checkpoint " + f.path() + " has format version " + std::to_string(version) + "; this program reads version " +
            std::to_string(kCheckpointVersion));
  check(f.meta("kind") == kind, "checkpoint " + f.path() + " is a " + f.meta("kind") + " file, not a " + kind + " file");
}

void common_metadata(SafetensorsWriter& w, const std::string& kind, long long step) {
  w.metadata("format", kFormat);
  w.metadata("format_version", std::to_string(kCheckpointVersion));
  w.metadata("kind", kind);
  w.metadata("step", std::to_string(step));
}

}  // namespace

std::string checkpoint_name(long long step) { return "ckpt_" + std::to_string(step); }

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  check(!path.empty(), "no checkpoint given (an output directory or a ckpt_<step> directory)");
  check(fs::exists(path, ec), "checkpoint not found: " + path);
  if (fs::is_regular_file(path, ec)) {
    check(fs::path(path).filename() == "model.safetensors",
          path + " is not a checkpoint (expected a run's output directory, a ckpt_<step> directory or its model.safetensors)");
    const std::string dir = fs::path(path).parent_path().string();
    return dir.empty() ? "." : dir;
  }
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (file_exists(dir + "/latest")) {
    std::ifstream f(dir + "/latest");
    std::string name;
    std::getline(f, name);
    while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
    check(!name.empty(), dir + "/latest is empty (it should name the newest checkpoint, e.g. ckpt_100)");
    // A directory name in this folder: no '/', no control byte (a NUL would cut the path short).
    bool plain = true;
    for (unsigned char c : name) plain &= c != '/' && c >= 0x20 && c != 0x7F;
    plain &= name != "." && name != "..";
    check(plain, dir + "/latest names " + quote_untrusted(name) + ", which is not a checkpoint directory name");
    const std::string ckpt = dir + "/" + name;
    if (file_exists(ckpt + "/model.safetensors")) return ckpt;  // (a resume also reads its state.safetensors)
    // A save stopped between two of its steps (docs/formats.md, "Writing is
    // atomic"): the step `latest` names is under its .old name while it is
    // re-saved; otherwise the newest complete checkpoint is the latest.
    const std::string found = complete_checkpoint(ckpt + ".old") ? ckpt + ".old" : newest_complete_checkpoint(dir);
    check(!found.empty(), dir + "/latest names " + quote_untrusted(name) +
                              ", but its model.safetensors does not exist, and the run has no other complete "
                              "checkpoint");
    std::fprintf(stderr, "note: %s/latest names %s, which is missing or incomplete (a save was interrupted); using %s\n",
                 dir.c_str(), quote_untrusted(name).c_str(), found.c_str());
    return found;
  }
  if (!file_exists(dir + "/model.safetensors")) {  // a first save stopped before it wrote `latest`
    const std::string found = newest_complete_checkpoint(dir);
    if (!found.empty()) {
      std::fprintf(stderr, "note: %s has no `latest` file (a save was interrupted); using %s, its newest complete checkpoint\n",
                   dir.c_str(), found.c_str());
      return found;
    }
  }
  check(file_exists(dir + "/model.safetensors"),
        dir + " is not a checkpoint: it has neither a `latest` file (a run's output directory) nor model.safetensors "
              "(a checkpoint directory)");
  return dir;
}

std::string checkpoint_run_dir(const std::string& ckpt_dir) {
  const std::string p = fs::path(ckpt_dir).parent_path().string();
  return p.empty() ? "." : p;
}

// ---- model metadata --------------------------------------------------------

ModelMeta read_model_meta(const SafetensorsFile& f) {
  check_format(f, "model");
  ModelMeta m;
  ModelConfig& c = m.cfg;
  c.name = f.meta("config.name");
  // Every size within the range the flags accept (core/config.h), checked
  // here, before anything is built from it.
  c.vocab = (int)parse_int(f, "config.vocab", 1, kMaxVocab);
  c.dim = (int)parse_int(f, "config.dim", 1, kMaxDim);
  c.layers = (int)parse_int(f, "config.layers", 1, kMaxLayers);
  c.heads = (int)parse_int(f, "config.heads", 1, kMaxHeads);
  c.hidden = (int)parse_int(f, "config.hidden", 1, kMaxHidden);
  c.max_seq = (int)parse_int(f, "config.max_seq", 1, kMaxSeq);
  c.tied = parse_int(f, "config.tied", 0, 1) != 0;
  c.rope_theta = parse_double(f, "config.rope_theta");
  c.norm_eps = parse_double(f, "config.norm_eps");
  // Checkpoints written before --embed-scale existed have no such key: the method's own scale.
  if (f.metadata().count("config.embed_scale")) c.embed_scale = parse_double(f, "config.embed_scale");
  try {
    c.validate();
  } catch (const Error& e) {
    fail("checkpoint " + f.path() + " has an impossible model config: " + e.what());
  }
  m.method = f.meta("method");
  bool known = false;
  for (auto& n : method_names()) known |= n == m.method;
  check(known, "checkpoint " + f.path() + " was trained with method '" + m.method + "', which this program does not know");
  // Method options: every option this program knows that the file records.
  // An option the file lacks was added after it was written: it takes the
  // value that reproduces how that run was trained, which is the option's
  // default unless kBeforeTheOption gives another for the file's method (an
  // option of another method keeps its default, as today's runs record it).
  struct Before {
    const char *option, *method, *value;
  };
  static const Before kBeforeTheOption[] = {
      {"latent-warmup-steps", "latent_cot", "0"},  // no halting-loss warm-up before 2026-12-02
  };
  std::vector<std::string> args = {"checkpoint"};
  for (auto& kv : method_option_values(m.method_opts)) {
    auto it = f.metadata().find("method." + kv.first);
    if (it != f.metadata().end()) {
      args.push_back("--" + kv.first + "=" + it->second);
      continue;
    }
    for (const Before& b : kBeforeTheOption)
      if (kv.first == b.option && m.method == b.method) args.push_back("--" + kv.first + "=" + b.value);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  Flags flags("checkpoint", "");
  add_method_flags(flags, m.method_opts);
  try {
    flags.parse((int)argv.size(), argv.data());
  } catch (const Error& e) {
    fail("checkpoint " + f.path() + " has a bad method option: " + e.what());
  }
  m.tokenizer = f.meta("tokenizer");
  m.step = parse_int(f, "step", 0, kMaxSteps);
  return m;
}

void check_model_meta(const ModelMeta& ck, const ModelMeta& want, const std::string& file) {
  const std::string head = "checkpoint " + file + " ";
  auto same_int = [&](long long a, long long b, const std::string& what) {
    check(a == b, head + "has " + what + " " + std::to_string(a) + " but the model was configured with " + std::to_string(b));
  };
  const ModelConfig &a = ck.cfg, &b = want.cfg;
  same_int(a.vocab, b.vocab, "vocabulary");
  same_int(a.dim, b.dim, "width (dim)");
  same_int(a.layers, b.layers, "layers");
  same_int(a.heads, b.heads, "heads");
  same_int(a.hidden, b.hidden, "SwiGLU hidden width");
  same_int(a.max_seq, b.max_seq, "context (max_seq)");
  check(a.tied == b.tied, head + "has " + (a.tied ? "a tied" : "an untied") + " output head but the model was configured " +
                              (b.tied ? "tied" : "untied"));
  check(a.rope_theta == b.rope_theta,
        head + "has rope theta " + exact(a.rope_theta) + " but the model was configured with " + exact(b.rope_theta));
  check(a.norm_eps == b.norm_eps,
        head + "has norm eps " + exact(a.norm_eps) + " but the model was configured with " + exact(b.norm_eps));
  auto scale = [](double s) { return s > 0 ? exact(s) : std::string("the method's own"); };
  check(a.embed_scale == b.embed_scale, head + "has embedding scale " + scale(a.embed_scale) +
                                            " but the model was configured with " + scale(b.embed_scale));
  check(ck.method == want.method,
        head + "was trained with method " + ck.method + " but the model is configured for " + want.method);
  MethodOptions oa = ck.method_opts, ob = want.method_opts;
  auto va = method_option_values(oa), vb = method_option_values(ob);
  for (size_t i = 0; i < va.size(); i++)
    check(va[i].second == vb[i].second, head + "has --" + va[i].first + " " + va[i].second +
                                            " but the model was configured with " + vb[i].second);
}

// ---- writing -----------------------------------------------------------------

std::string write_checkpoint(const std::string& out, const ModelMeta& meta, const ParamLayout& layout,
                             const float* params, const TrainState& st, Dtype moment_dtype, const void* m,
                             const void* v) {
  check(moment_dtype == Dtype::F32 || moment_dtype == Dtype::F64, "internal: moments must be F32 or F64");
  check(meta.step == st.step, "internal: model and state of a checkpoint must be at the same step");
  std::error_code ec;
  fs::create_directories(out, ec);
  check(fs::is_directory(out, ec), "cannot create the output directory " + out + ": " + ec.message());
  const std::string name = checkpoint_name(meta.step);
  const std::string final_dir = out + "/" + name, tmp = final_dir + ".tmp", old = final_dir + ".old";

  // model.safetensors
  SafetensorsWriter mw;
  common_metadata(mw, "model", meta.step);
  const ModelConfig& c = meta.cfg;
  mw.metadata("config.name", c.name);
  mw.metadata("config.vocab", std::to_string(c.vocab));
  mw.metadata("config.dim", std::to_string(c.dim));
  mw.metadata("config.layers", std::to_string(c.layers));
  mw.metadata("config.heads", std::to_string(c.heads));
  mw.metadata("config.hidden", std::to_string(c.hidden));
  mw.metadata("config.max_seq", std::to_string(c.max_seq));
  mw.metadata("config.tied", c.tied ? "1" : "0");
  mw.metadata("config.rope_theta", exact(c.rope_theta));
  mw.metadata("config.norm_eps", exact(c.norm_eps));
  mw.metadata("config.embed_scale", exact(c.embed_scale));
  mw.metadata("method", meta.method);
  MethodOptions mo = meta.method_opts;
  for (auto& kv : method_option_values(mo)) mw.metadata("method." + kv.first, kv.second);
  mw.metadata("tokenizer", meta.tokenizer);
  mw.metadata("parameters", std::to_string(layout.total()));
  for (auto& t : layout.tensors()) {
    std::vector<uint64_t> shape(t.shape.begin(), t.shape.end());
    mw.add(t.name, std::move(shape), params + t.offset);
  }

  // state.safetensors
  const uint64_t n = layout.total();
  const int64_t step = st.step, warmup = st.schedule.warmup, total = st.schedule.total;
  const uint64_t train_tokens = st.train_tokens;
  SafetensorsWriter sw;
  common_metadata(sw, "state", st.step);
  sw.metadata("optimizer", "adamw");
  for (auto& kv : st.options) sw.metadata("option." + kv.first, kv.second);
  sw.metadata("world_size", std::to_string(st.world_size));
  sw.add("adamw.m", moment_dtype, {n}, m);
  sw.add("adamw.v", moment_dtype, {n}, v);
  sw.add("step", {1}, &step);
  sw.add("data.rng", {4}, st.data_rng.data());
  sw.add("data.train_tokens", {1}, &train_tokens);
  sw.add("progress.tokens", {1}, &st.tokens);
  sw.add("progress.flops", {1}, &st.flops);
  sw.add("progress.other_flops", {1}, &st.other_flops);
  sw.add("progress.seconds", {1}, &st.seconds);
  sw.add("schedule.lr", {1}, &st.schedule.lr);
  sw.add("schedule.min_lr_frac", {1}, &st.schedule.min_frac);
  sw.add("schedule.warmup", {1}, &warmup);
  sw.add("schedule.total_steps", {1}, &total);

  // The protocol (docs/formats.md, "Writing is atomic"); every state between
  // two of these steps loads (tests/test_checkpoint_protocol.cpp):
  //  1. remove what a killed save left: every ckpt_*.tmp directory
  //  2. write both files into a fresh ckpt_<step>.tmp/
  //  3. a checkpoint of this step already there (a resume from an earlier step
  //     saves it again) becomes ckpt_<step>.old, which the loader takes while
  //     ckpt_<step> is missing
  //  4. rename ckpt_<step>.tmp to ckpt_<step>
  //  5. replace `latest` (latest.tmp, rename): the new checkpoint is the latest
  //  6. remove every ckpt_*.old: `latest` names a complete checkpoint
  remove_leftovers(out, ".tmp");
  check(fs::create_directory(tmp, ec), "cannot create checkpoint directory " + tmp + ": " + ec.message());
  file_op_done();
  try {
    mw.write(tmp + "/model.safetensors");
    sw.write(tmp + "/state.safetensors");
    sync_directory(tmp);
    if (fs::exists(final_dir, ec)) {
      if (fs::exists(old, ec)) remove_checkpoint_dir(old);  // superseded by final_dir
      fs::rename(final_dir, old, ec);
      check(!ec, "cannot replace " + final_dir + ": " + ec.message());
      file_op_done();
    }
    fs::rename(tmp, final_dir, ec);
    check(!ec, "cannot rename " + tmp + " to " + final_dir + ": " + ec.message());
    file_op_done();
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  sync_directory(out);
  write_file_atomic(out + "/latest", name + "\n");  // the checkpoint is complete
  remove_leftovers(out, ".old");
  sync_directory(out);
  return final_dir;
}

// ---- reading -------------------------------------------------------------------

// The reader refuses what the writer refuses (save_checkpoint): a NaN or
// infinite value, which only a damaged file can hold.
template <class V>
static void check_finite(const std::vector<V>& x, const std::string& file, const std::string& tensor) {
  for (size_t i = 0; i < x.size(); i++)
    if (!std::isfinite(x[i]))
      fail("checkpoint " + file + " has a non-finite value (" + (std::isnan(x[i]) ? "NaN" : "infinity") +
           ") in tensor " + tensor + " at element " + std::to_string(i) +
           "; the trainer never saves one, so the file is damaged");
}

void check_checkpoint_size(const SafetensorsFile& f, const ModelConfig& cfg) {
  // Constant time: the backbone's parameter count from the sizes, against the
  // bytes of tensors the file holds (the method's own tensors come on top).
  double bytes = 0;
  for (auto& t : f.tensors()) bytes += (double)(t.end - t.begin);
  const double need = 4.0 * (double)cfg.num_params();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", bytes);
  check(need <= bytes, "checkpoint " + f.path() + ": its metadata describes a model of " +
                           std::to_string(cfg.num_params()) + " parameters (" + cfg.describe() +
                           ") but the file holds only " + buf + " bytes of tensors");
}

void check_checkpoint_tensors(const SafetensorsFile& f, const ParamLayout& layout) {
  for (auto& t : f.tensors())
    check(layout.has(t.name), "checkpoint " + f.path() + " has tensor " + quote_untrusted(t.name) +
                                  ", which the model does not have");
  for (auto& p : layout.tensors()) {
    const TensorEntry* t = f.find(p.name);
    check(t != nullptr, "checkpoint " + f.path() + " has no tensor " + p.name + " (the model needs it)");
    const std::vector<uint64_t> shape(p.shape.begin(), p.shape.end());
    check(t->shape == shape, "checkpoint " + f.path() + " has tensor " + p.name + " of shape " + shape_string(t->shape) +
                                 " but the model expects " + shape_string(shape));
    check(t->dtype == Dtype::F32, "checkpoint " + f.path() + " has tensor " + p.name + " of dtype " +
                                      dtype_name(t->dtype) + " (expected F32)");
  }
}

std::vector<float> read_checkpoint_params(const SafetensorsFile& f, const ModelMeta& want, const ParamLayout& layout) {
  check_model_meta(read_model_meta(f), want, f.path());
  check_checkpoint_tensors(f, layout);
  std::vector<float> params(layout.total()), tmp;
  for (auto& p : layout.tensors()) {
    f.read_floats(p.name, tmp);
    check_finite(tmp, f.path(), p.name);
    std::copy(tmp.begin(), tmp.end(), params.begin() + p.offset);
  }
  return params;
}

ModelMeta read_backbone_params(const SafetensorsFile& f, const ModelConfig& cfg, const ParamLayout& layout,
                               std::vector<float>& params) {
  const ModelMeta src = read_model_meta(f);
  check(params.size() == layout.total(), "internal: parameter buffer and layout differ in size");
  ParamLayout backbone;  // the backbone's tensors, as this model declares them
  add_backbone_params(backbone, cfg);
  std::vector<float> tmp;
  for (auto& p : backbone.tensors()) {
    const TensorEntry* t = f.find(p.name);
    check(t != nullptr, "--init-from: checkpoint " + f.path() + " has no tensor " + p.name +
                            " (this model's backbone needs it" +
                            (p.name == "output.weight" ? "; the checkpoint's head is tied to the embedding" : "") + ")");
    const std::vector<uint64_t> shape(p.shape.begin(), p.shape.end());
    check(t->shape == shape, "--init-from: checkpoint " + f.path() + " has tensor " + p.name + " of shape " +
                                 shape_string(t->shape) + " but this model needs " + shape_string(shape) +
                                 " (check --config and the size flags against the checkpoint's " + src.cfg.describe() + ")");
    check(t->dtype == Dtype::F32, "--init-from: checkpoint " + f.path() + " has tensor " + p.name + " of dtype " +
                                      dtype_name(t->dtype) + " (expected F32)");
    f.read_floats(p.name, tmp);
    check_finite(tmp, f.path(), p.name);
    const ParamInfo& dst = layout.get(p.name);
    std::copy(tmp.begin(), tmp.end(), params.begin() + dst.offset);
  }
  return src;
}

std::vector<std::pair<std::string, std::string>> read_train_options(const std::string& ckpt_dir) {
  SafetensorsFile f(ckpt_dir + "/state.safetensors", "checkpoint");
  check_format(f, "state");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& kv : f.metadata())
    if (kv.first.compare(0, 7, "option.") == 0) out.push_back({kv.first.substr(7), kv.second});
  return out;
}

TrainState read_train_state(const std::string& ckpt_dir, size_t n_params, long long model_step, std::vector<double>& m,
                            std::vector<double>& v) {
  SafetensorsFile f(ckpt_dir + "/state.safetensors", "checkpoint");
  check_format(f, "state");
  TrainState st;
  const std::vector<uint64_t> one = {1}, four = {4};
  const TensorEntry& tm = f.get("adamw.m");
  check(tm.shape == std::vector<uint64_t>{n_params},
        "checkpoint " + f.path() + " has AdamW moments of shape " + shape_string(tm.shape) + " but the model has " +
            std::to_string(n_params) + " parameters");
  const std::vector<uint64_t> pshape = {n_params};
  f.read_floats("adamw.m", m, &pshape);
  f.read_floats("adamw.v", v, &pshape);
  check_finite(m, f.path(), "adamw.m");
  check_finite(v, f.path(), "adamw.v");
  auto real = [&](const std::string& name) {
    std::vector<double> x;
    f.read_floats(name, x, &one);
    return x[0];
  };
  auto integer = [&](const std::string& name) {
    std::vector<int64_t> x;
    f.read_ints(name, x, &one);
    return (long long)x[0];
  };
  st.step = integer("step");
  check(st.step == model_step, "checkpoint " + ckpt_dir + " is inconsistent: model.safetensors is at step " +
                                   std::to_string(model_step) + " but state.safetensors at step " + std::to_string(st.step));
  std::vector<uint64_t> u64;
  f.read_u64("data.rng", u64, &four);
  for (int i = 0; i < 4; i++) st.data_rng[i] = u64[i];
  f.read_u64("data.train_tokens", u64, &one);
  st.train_tokens = u64[0];
  st.tokens = real("progress.tokens");
  st.flops = real("progress.flops");
  // absent from checkpoints written before non-matmul ops were counted: the total is then unknown
  st.other_flops = f.find("progress.other_flops") ? real("progress.other_flops") : NAN;
  st.seconds = real("progress.seconds");
  st.schedule.lr = real("schedule.lr");
  st.schedule.min_frac = real("schedule.min_lr_frac");
  st.schedule.warmup = integer("schedule.warmup");
  st.schedule.total = integer("schedule.total_steps");
  for (auto& kv : f.metadata())
    if (kv.first.compare(0, 7, "option.") == 0) st.options.push_back({kv.first.substr(7), kv.second});
  const auto ws = f.metadata().find("world_size");
  if (ws != f.metadata().end()) {
    char* end = nullptr;
    const long w = std::strtol(ws->second.c_str(), &end, 10);
    check(!ws->second.empty() && *end == 0 && w >= 1 && w <= 1 << 20,
          "checkpoint " + f.path() + " has metadata world_size " + quote_untrusted(ws->second) +
              " (expected a count of ranks >= 1)");
    st.world_size = (int)w;
  }
  return st;
}

void restore_metrics_log(const std::string& from, const std::string& to, long long step) {
  std::string kept;
  std::ifstream f(from, std::ios::binary);
  for (std::string line; f && std::getline(f, line);) {
    try {
      const Json j = parse_json(line, from);
      const Json* s = j.find("step");
      uint64_t n;
      if (s && s->to_u64(&n) && (long long)n <= step) kept += line + "\n";
    } catch (const Error&) {
      // a line cut short by a crash: dropped
    }
  }
  write_file_atomic(to, kept);
}

}  // namespace ada
