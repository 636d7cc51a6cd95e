// The checkpoint protocol on disk (docs/formats.md, "Writing is atomic"):
// a save killed between any two of its file operations leaves a run that
// loads a complete checkpoint, and the next save cleans what it left. Also
// the checks made before a model is built from a checkpoint's metadata, and
// that a refused resume leaves every file of the run as it was.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <map>

#include "methods/registry.h"
#include "train/atomic_file.h"
#include "train/checkpoint.h"
#include "train/cpu_instances.h"
#include "train/trainer.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;
namespace fs = std::filesystem;

namespace {

using Cpu = CpuBackend<float>;

ModelMeta test_meta(long long step) {
  ModelMeta m;
  m.cfg = preset_config("test");
  m.method = "standard";
  m.tokenizer = "bytes";
  m.step = step;
  return m;
}

ParamLayout test_layout() {
  auto method = make_method<Cpu>("standard", MethodOptions());
  return model_layout(preset_config("test"), *method);
}

// Parameters and moments that say which save wrote them: `version`.
struct Saved {
  std::vector<float> params, m, v;
};
Saved contents(const ParamLayout& layout, int version) {
  Saved s;
  for (size_t i = 0; i < layout.total(); i++) {
    s.params.push_back(0.001f * (float)(i % 97) + (float)version);
    s.m.push_back((float)version);
    s.v.push_back(1.0f + (float)version);
  }
  return s;
}

void save(const std::string& out, long long step, const ParamLayout& layout, const Saved& s) {
  TrainState st;
  st.step = step;
  st.train_tokens = 1000;
  write_checkpoint(out, test_meta(step), layout, s.params.data(), st, Dtype::F32, s.m.data(), s.v.data());
}

// Saves in a child process that stops after its n-th file operation, as a
// kill would. Returns true when the save stopped there, false when it
// finished first.
bool save_stopped_after(int n, const std::string& out, long long step, const ParamLayout& layout, const Saved& s) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    simulate_crash_after(n);
    try {
      save(out, step, layout, s);
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  const int code = WEXITSTATUS(status);
  EXPECT_TRUE(code == 0 || code == kSimulatedCrashExit) << "the save failed: exit " << code;
  return code == kSimulatedCrashExit;
}

// What `--resume out` would load: the checkpoint resolve_checkpoint picks,
// read completely. Returns its step and the version its parameters carry.
std::pair<long long, int> load(const std::string& out, const ParamLayout& layout) {
  const std::string dir = resolve_checkpoint(out);
  SafetensorsFile f(dir + "/model.safetensors", "checkpoint");
  const ModelMeta meta = read_model_meta(f);
  const std::vector<float> p = read_checkpoint_params(f, test_meta(meta.step), layout);
  std::vector<double> m, v;
  const TrainState st = read_train_state(dir, layout.total(), meta.step, m, v);
  EXPECT_EQ(st.step, meta.step);
  const int version = (int)p[0];
  EXPECT_EQ(m[0], version);  // model and state of the same save
  return {meta.step, version};
}

std::vector<std::string> leftovers(const std::string& out) {
  std::vector<std::string> v;
  for (auto& e : fs::directory_iterator(out)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 4 && (n.compare(n.size() - 4, 4, ".tmp") == 0 || n.compare(n.size() - 4, 4, ".old") == 0))
      v.push_back(n);
  }
  return v;
}

// Every file of a folder tree and its bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (auto& e : fs::recursive_directory_iterator(dir))
    files[e.path().string()] = e.is_regular_file() ? read_bytes(e.path().string()) : "<dir>";
  return files;
}

}  // namespace

// For each kind of save (a first step after an existing one; the same step
// saved again, as a resume from an earlier checkpoint does, with `latest`
// naming it), stop the save after each of its file operations in turn: the
// run must then load a complete checkpoint, the old one or the new one, never
// a mix; and the next save must leave exactly its checkpoint, no .tmp or .old.
TEST(CheckpointProtocol, ASaveStoppedAfterAnyFileOperationLeavesALoadableRun) {
  const ParamLayout layout = test_layout();
  const Saved v1 = contents(layout, 1), v2 = contents(layout, 2), v3 = contents(layout, 3);
  struct Kind {
    std::string name;
    long long existing, saving;  // the run holds ckpt_<existing> (its latest) and saves step `saving`
  };
  for (const Kind& k : {Kind{"new_step", 10, 20}, Kind{"same_step", 20, 20}}) {
    SCOPED_TRACE(k.name);
    int stops = 0;
    for (int n = 1;; n++) {
      SCOPED_TRACE("stopped after file operation " + std::to_string(n));
      const std::string out = scratch_dir("protocol_" + k.name);
      save(out, 5, layout, v1);
      save(out, k.existing, layout, v1);
      // what an earlier killed save left: a half-written directory of another step
      ASSERT_TRUE(fs::create_directory(out + "/ckpt_7.tmp"));
      write_bytes(out + "/ckpt_7.tmp/model.safetensors", "partial");
      const auto before = load(out, layout);
      EXPECT_EQ(before, std::make_pair(k.existing, 1));
      if (!save_stopped_after(n, out, k.saving, layout, v2)) break;  // the save finished: every point was tried
      stops++;
      const auto now = load(out, layout);
      EXPECT_TRUE(now == before || now == std::make_pair(k.saving, 2)) << "loaded step " << now.first << " version " << now.second;
      EXPECT_EQ(load(out + "/ckpt_5", layout), std::make_pair(5LL, 1));  // an older checkpoint is never touched
      // The next save (a resumed run reaching step 30) completes and cleans up.
      save(out, 30, layout, v3);
      EXPECT_EQ(load(out, layout), std::make_pair(30LL, 3));
      EXPECT_EQ(read_bytes(out + "/latest"), "ckpt_30\n");
      EXPECT_TRUE(leftovers(out).empty()) << leftovers(out)[0];
    }
    EXPECT_GE(stops, k.existing == k.saving ? 12 : 8) << "fewer file operations than the protocol has";
  }
}

// The window of the issue, by hand: ckpt_20 renamed to .old, the new one not
// yet in place, `latest` naming ckpt_20.
TEST(CheckpointProtocol, TheReSaveWindowLoadsTheCheckpointLatestNamed) {
  const ParamLayout layout = test_layout();
  const std::string out = scratch_dir("protocol_window");
  save(out, 10, layout, contents(layout, 1));
  save(out, 20, layout, contents(layout, 2));
  fs::rename(out + "/ckpt_20", out + "/ckpt_20.old");
  EXPECT_EQ(resolve_checkpoint(out), out + "/ckpt_20.old");
  EXPECT_EQ(load(out, layout), std::make_pair(20LL, 2));
  // Neither it nor any other: the newest complete checkpoint.
  fs::remove_all(out + "/ckpt_20.old");
  EXPECT_EQ(resolve_checkpoint(out), out + "/ckpt_10");
  // An incomplete directory is never taken.
  fs::create_directory(out + "/ckpt_40");
  fs::copy_file(out + "/ckpt_10/model.safetensors", out + "/ckpt_40/model.safetensors");
  EXPECT_EQ(resolve_checkpoint(out), out + "/ckpt_10");
  // No `latest` at all (a first save stopped before writing it).
  fs::remove(out + "/latest");
  EXPECT_EQ(resolve_checkpoint(out), out + "/ckpt_10");
}

// formats.md: "a half-written ckpt_<step>.tmp/ is removed by the next save",
// whatever step that save is.
TEST(CheckpointProtocol, LeftoversAreRemovedByTheNextSaveOfAnyStep) {
  const ParamLayout layout = test_layout();
  const std::string out = scratch_dir("protocol_leftovers");
  const Saved s = contents(layout, 1);
  save(out, 10, layout, s);
  for (const char* d : {"ckpt_3.tmp", "ckpt_11.tmp", "ckpt_10.old", "ckpt_999.tmp"}) {
    ASSERT_TRUE(fs::create_directory(out + "/" + d));
    write_bytes(out + "/" + d + "/model.safetensors.tmp", "x");
  }
  fs::create_directory(out + "/notes.tmp");  // not a checkpoint: left alone
  save(out, 12, layout, s);
  EXPECT_EQ(leftovers(out), std::vector<std::string>{"notes.tmp"});
  EXPECT_EQ(load(out, layout), std::make_pair(12LL, 1));
}

// ---- metadata checked before any model is built --------------------------

namespace {

// A copy of a checkpoint file with one metadata value changed (or removed
// when value is null) and the same tensors.
void rewrite(const std::string& from, const std::string& to, const std::string& key, const char* value) {
  SafetensorsFile f(from, "checkpoint");
  SafetensorsWriter w;
  for (auto& [k, v] : f.metadata())
    if (k != key) w.metadata(k, v);
  if (value) w.metadata(key, value);
  for (auto& t : f.tensors()) w.add(t.name, t.dtype, t.shape, f.bytes(t));
  w.write(to);
}

}  // namespace

// Every number of the metadata is range-checked, and a claim the tensors do
// not back (a checkpoint "of 100,000 layers") is refused at once: before the
// fix, eval built that model for minutes.
TEST(CheckpointMetadata, EveryNumberIsCheckedBeforeTheModelIsBuilt) {
  const ParamLayout layout = test_layout();
  const std::string out = scratch_dir("meta_ranges");
  save(out, 10, layout, contents(layout, 1));
  const std::string good = out + "/ckpt_10/model.safetensors", bad_dir = out + "/bad";
  fs::create_directory(bad_dir);
  const std::vector<const char*> not_integers = {"1.5", "1e3", "0x10", " 4", "4 ", "", "99999999999999999999", "-"};
  std::vector<std::pair<std::string, std::vector<const char*>>> cases = {
      {"config.vocab", {"0", "-1", "16777217", "2147483648"}},
      {"config.dim", {"0", "65537"}},
      {"config.layers", {"0", "100000", "4096", "4097"}},  // 4096 is in range: the tensors do not back it
      {"config.heads", {"0", "3", "4097"}},
      {"config.hidden", {"0", "262145", "200000"}},
      {"config.max_seq", {"0", "2147483647", "1048577"}},
      {"config.tied", {"2", "-1"}},
      {"step", {"-1", "1000000000001"}},
      {"format_version", {"0", "2"}},
  };
  for (auto& c : cases) c.second.insert(c.second.end(), not_integers.begin(), not_integers.end());
  cases.push_back({"config.rope_theta", {"nan", "inf", "0", "-1", "1e400", "x"}});
  cases.push_back({"config.norm_eps", {"nan", "0", "2", "-1e-5"}});
  cases.push_back({"config.embed_scale", {"nan", "-1", "1e9"}});
  cases.push_back({"method.ponder-steps", {"1.5", "1e9", "0"}});
  cases.push_back({"method.pauses", {"1.5", "100000"}});
  cases.push_back({"config.layers", {nullptr}});  // missing
  Cpu be;
  for (auto& [key, values] : cases)
    for (const char* value : values) {
      SCOPED_TRACE(key + " = " + (value ? "'" + std::string(value) + "'" : std::string("(missing)")));
      rewrite(good, bad_dir + "/model.safetensors", key, value);
      const auto t0 = std::chrono::steady_clock::now();
      expect_error([&] { load_checkpoint_model(be, bad_dir); }, {bad_dir + "/model.safetensors"});
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
    }
  rewrite(good, bad_dir + "/model.safetensors", "config.layers", "100000");
  expect_error([&] { load_checkpoint_model(be, bad_dir); }, {"metadata config.layers must be between 1 and 4096 (got 100000)"});
  rewrite(good, bad_dir + "/model.safetensors", "config.layers", "4000");
  expect_error([&] { load_checkpoint_model(be, bad_dir); }, {"its metadata describes a model of", "bytes of tensors"});
  rewrite(good, bad_dir + "/model.safetensors", "config.vocab", "1.5");
  expect_error([&] { load_checkpoint_model(be, bad_dir); }, {"metadata config.vocab expects an integer, got '1.5'"});
  // The unchanged file loads.
  rewrite(good, bad_dir + "/model.safetensors", "tokenizer", "bytes");
  EXPECT_EQ(load_checkpoint_model(be, bad_dir).model->num_params(), layout.total());
}

// A method option added after a checkpoint was written reads as the value
// that reproduces that run's training: latent_cot's warm-up did not exist
// before 2026-12-02, so a checkpoint without the key ran with none (0), not
// with today's default (-1, half the run), and a study reusing such a run
// with `latent-warmup-steps=0` accepts it.
TEST(CheckpointMetadata, AnOptionTheFileLacksTakesItsValueFromBeforeTheOption) {
  const ParamLayout layout = test_layout();
  const std::string out = scratch_dir("meta_before_option");
  save(out, 10, layout, contents(layout, 1));
  const std::string good = out + "/ckpt_10/model.safetensors", latent = out + "/latent.safetensors",
                    old = out + "/old.safetensors";
  auto warmup = [](const std::string& file) { return read_model_meta(SafetensorsFile(file, "checkpoint")).method_opts.latent.warmup; };
  rewrite(good, latent, "method", "latent_cot");  // metadata only: read_model_meta does not look at the tensors
  EXPECT_EQ(warmup(latent), -1);
  rewrite(latent, old, "method.latent-warmup-steps", nullptr);
  EXPECT_EQ(warmup(old), 0);
  rewrite(latent, old, "method.latent-warmup-steps", "250");
  EXPECT_EQ(warmup(old), 250);
  // another method's old checkpoint: the option is not its own, it keeps today's default
  rewrite(good, old, "method.latent-warmup-steps", nullptr);
  EXPECT_EQ(read_model_meta(SafetensorsFile(good, "checkpoint")).method, "standard");
  EXPECT_EQ(warmup(old), -1);
}

// The tensors against the model the metadata describes: names, shapes,
// dtypes and byte sizes, each a clear error before the model is allocated.
TEST(CheckpointMetadata, TensorsMustMatchTheDescribedModel) {
  const ParamLayout layout = test_layout();
  const std::string out = scratch_dir("meta_tensors");
  save(out, 10, layout, contents(layout, 1));
  SafetensorsFile f(out + "/ckpt_10/model.safetensors", "checkpoint");
  const std::string bad = out + "/bad";
  fs::create_directory(bad);
  auto write_changed = [&](const std::string& victim, const std::string& new_name, std::vector<uint64_t> new_shape,
                           Dtype new_dtype, bool drop) {
    SafetensorsWriter w;
    for (auto& [k, v] : f.metadata()) w.metadata(k, v);
    std::vector<char> zeros(1 << 20);
    for (auto& t : f.tensors()) {
      if (t.name != victim) {
        w.add(t.name, t.dtype, t.shape, f.bytes(t));
      } else if (!drop) {
        w.add(new_name, new_dtype, new_shape, zeros.data());
      }
    }
    w.write(bad + "/model.safetensors");
  };
  Cpu be;
  const std::string victim = "layers.1.attn.wo.weight";  // (16, 16)
  write_changed(victim, victim, {16, 16}, Dtype::F32, true);  // too few bytes for the model: refused first
  expect_error([&] { load_checkpoint_model(be, bad); }, {"its metadata describes a model of 5168 parameters",
                                                         "the file holds only 19648 bytes of tensors"});
  write_changed(victim, "layers.1.attn.wo.weigth", {16, 16}, Dtype::F32, false);
  expect_error([&] { load_checkpoint_model(be, bad); },
               {"has tensor 'layers.1.attn.wo.weigth', which the model does not have"});
  write_changed(victim, victim, {16, 17}, Dtype::F32, false);
  expect_error([&] { load_checkpoint_model(be, bad); }, {"has tensor " + victim + " of shape [16, 17] but the model expects [16, 16]"});
  write_changed(victim, victim, {16, 16}, Dtype::F64, false);
  expect_error([&] { load_checkpoint_model(be, bad); }, {"of dtype F64 (expected F32)"});
}

// Building the layout is linear: many layers' tensors are found in constant time.
TEST(CheckpointMetadata, ParamLayoutLookupIsConstantTime) {
  ModelConfig c = preset_config("test");
  c.layers = kMaxLayers;
  const auto t0 = std::chrono::steady_clock::now();
  auto method = make_method<Cpu>("standard", MethodOptions());
  const ParamLayout layout = model_layout(c, *method);
  for (int l = 0; l < c.layers; l++) EXPECT_TRUE(layout.has("layers." + std::to_string(l) + ".mlp.w_down.weight"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_EQ(layout.tensors().size(), 6u * kMaxLayers + 3);  // 6 per layer; embedding, norm, head
  EXPECT_EQ(layout.get("layers.4095.attn.wo.weight").shape, (std::vector<int>{16, 16}));
}

// ---- a refused resume touches nothing --------------------------------------

// Every way a resume can be refused, after the run got as far as reading its
// checkpoint: every file of the run (checkpoints, latest, metrics.jsonl,
// loss.svg) must be byte-identical afterwards.
TEST(RefusedResume, LeavesEveryFileOfTheRunByteIdentical) {
  const std::string dir = scratch_dir("refused_resume"), out = dir + "/run";
  const Dataset d = toy_data();
  TrainOptions a = toy_options(out, "standard", 12);
  a.save_every = 6;
  {
    ScopedThreads one(1);
    Cpu be;
    Trainer<Cpu> t(be, a);
    t.run(d, false);
  }
  // A metrics log that went on past the checkpoint: a resume would drop those lines.
  write_bytes(out + "/metrics.jsonl", read_bytes(out + "/metrics.jsonl") + "{\"step\": 13, \"loss\": 1}\n");
  const auto before = snapshot(out);
  ASSERT_GE(before.size(), 8u);

  Dataset other = toy_data(23, 2000);  // another training set: another token count
  Dataset bad_ids = toy_data();
  bad_ids.val = std::make_shared<VectorTokens>(std::vector<int32_t>(300, 40));  // ids outside V = 23
  struct Case {
    std::string what;
    std::function<void(TrainOptions&)> change;
    const Dataset* data;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"other data", [](TrainOptions&) {}, &other, "(a different --data or --tokenizer?)"},
      {"ids outside the vocabulary", [](TrainOptions&) {}, &bad_ids, "outside the vocabulary"},
      {"no steps left", [](TrainOptions& o) { o.steps = 12; }, &d, "raise --steps"},
      {"another size", [](TrainOptions& o) { o.dim = 32; }, &d, "has width (dim) 16"},
      {"another method", [](TrainOptions& o) { o.method = "looped"; }, &d, "was trained with method standard"},
      {"bad option", [](TrainOptions& o) { o.batch = 0; }, &d, "--batch must be between"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    TrainOptions b = toy_options("", "standard", 20);
    b.resume = out;
    c.change(b);
    bool refused = false;
    try {
      ScopedThreads one(1);
      Cpu be;
      Trainer<Cpu> t(be, b);
      t.run(*c.data, false);
    } catch (const Error& e) {
      refused = true;
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
    EXPECT_TRUE(refused);
    EXPECT_EQ(snapshot(out), before) << "a refused resume changed the run";
  }
}

// The case through the program: `train_cpu --resume run --data
// other.txt` rewrote run/metrics.jsonl before refusing.
TEST(RefusedResume, TheProgramLeavesTheRunByteIdentical) {
  const std::string train_cpu = program("train_cpu");
  if (train_cpu.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the programs' folder (make test does)";
  const std::string dir = scratch_dir("refused_resume_program");
  std::string text, other;
  for (int i = 0; i < 150; i++) text += "In the beginning " + std::to_string(i) + ".\n";
  for (int i = 0; i < 120; i++) other += "And the earth " + std::to_string(i) + ".\n";
  write_bytes(dir + "/a.txt", text);
  write_bytes(dir + "/other.txt", other);
  const std::string base = train_cpu + " --config test --vocab 256 --tokenizer bytes --seq 16 --batch 2 "
                                       "--eval-every 2 --eval-batches 1 --threads 1 --out " + dir + "/run";
  const ProgramResult r = run_program(base + " --steps 4 --save-every 2 --data " + dir + "/a.txt", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto before = snapshot(dir + "/run");
  const std::string run = dir + "/run";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --resume " + run + " --data " + dir + "/other.txt --steps 8", "(a different --data or --tokenizer?)"},
      {" --resume " + run + "/ckpt_2 --data " + dir + "/other.txt --steps 8", "(a different --data or --tokenizer?)"},
      {" --resume " + run + " --steps 4", "raise --steps"},
      {" --resume " + run + " --method ponder --steps 8", "--method ponder does not match the checkpoint"},
      {" --resume " + run + " --steps 8.5", "--steps expects an integer, got '8.5'"},
      {" --resume " + run + " --steps 8 --dim 32", "has width (dim) 16 but the model was configured with 32"},
  };
  for (auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    expect_program_error(run_program(train_cpu + args, dir), needle);
    EXPECT_EQ(snapshot(run), before) << "a refused resume changed the run";
  }
}
