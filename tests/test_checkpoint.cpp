// safetensors and checkpoints: round trips, a minimal independent reader
// that agrees with the writer, the strict JSON header parser, and one clear
// error per damaged or mismatched file, with earlier checkpoints unharmed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "train/cpu_instances.h"
#include "methods/registry.h"
#include "train/atomic_file.h"
#include "train/checkpoint.h"
#include "core/json.h"
#include "train/safetensors.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;

namespace {

// A safetensors reader written from the format description alone, sharing no
// code with src/train: the 8-byte little-endian header length, plain string
// searches in the header text, then the tensor's bytes at its offsets.
struct MiniSafetensors {
  std::string bytes, header;
  uint64_t data_start = 0;

  explicit MiniSafetensors(const std::string& path) : bytes(read_bytes(path)) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)bytes[i];
    header = bytes.substr(8, n);
    data_start = 8 + n;
  }
  // The integers of the first "[...]" after position `from` of the header.
  std::vector<uint64_t> list_after(size_t from) const {
    const size_t a = header.find('[', from), b = header.find(']', a);
    std::vector<uint64_t> v;
    std::stringstream ss(header.substr(a + 1, b - a - 1));
    for (std::string item; std::getline(ss, item, ',');)
      if (item.find_first_not_of(' ') != std::string::npos) v.push_back(std::stoull(item));
    return v;
  }
  // The quoted string that follows `"key":` at or after `from`.
  std::string string_after(const std::string& key, size_t from) const {
    const size_t k = header.find("\"" + key + "\":", from);
    const size_t q1 = header.find('"', k + key.size() + 3), q2 = header.find('"', q1 + 1);
    return header.substr(q1 + 1, q2 - q1 - 1);
  }
  size_t entry(const std::string& name) const {
    const size_t k = header.find("\"" + name + "\":{");
    EXPECT_NE(k, std::string::npos) << name;
    return k;
  }
  std::string dtype(const std::string& name) const { return string_after("dtype", entry(name)); }
  std::vector<uint64_t> shape(const std::string& name) const { return list_after(header.find("\"shape\"", entry(name))); }
  std::vector<uint64_t> offsets(const std::string& name) const {
    return list_after(header.find("\"data_offsets\"", entry(name)));
  }
  template <class T>
  std::vector<T> values(const std::string& name) const {
    const auto off = offsets(name);
    std::vector<T> v((off[1] - off[0]) / sizeof(T));
    std::memcpy(v.data(), bytes.data() + data_start + off[0], off[1] - off[0]);
    return v;
  }
  std::string metadata(const std::string& key) const { return string_after(key, header.find("\"__metadata__\"")); }
};

// A file made of a raw header text and data bytes (for damaged files).
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::string h = header;
  uint64_t n = h.size();
  std::string bytes(8, '\0');
  std::memcpy(&bytes[0], &n, 8);
  write_bytes(path, bytes + h + data);
}

std::string f32_bytes(std::vector<float> v) { return std::string((const char*)v.data(), v.size() * 4); }

}  // namespace

// ---- safetensors -----------------------------------------------------------

TEST(Safetensors, RoundTripWithMetadata) {
  const std::string dir = scratch_dir("st_roundtrip"), path = dir + "/t.safetensors";
  const std::vector<float> a = {1.5f, -2.25f, 3e-8f, NAN, INFINITY, 0.f};
  const std::vector<double> b = {M_PI, -1e300, 0.1};
  const std::vector<int64_t> c = {-7};
  const std::vector<uint64_t> d = {0, 1, UINT64_MAX, 0x9E3779B97F4A7C15ull};
  const std::vector<int32_t> e = {1, -2, 3, -4};
  SafetensorsWriter w;
  w.add("layers.0.a", {2, 3}, a.data());
  w.add("b", {3}, b.data());
  w.add("scalar", {1}, c.data());
  w.add("rng", {4}, d.data());
  w.add("ints", {2, 2}, e.data());
  w.metadata("plain", "value");
  w.metadata("tricky \"key\"", "line\nbreak \\ and \xC3\xA9 and \x01");
  w.write(path);
  EXPECT_FALSE(exists(path + ".tmp"));

  const std::string raw = read_bytes(path);
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header padded to a multiple of 8";
  EXPECT_EQ(raw[8], '{');

  SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.tensors()[0].name, "layers.0.a");  // file order = insertion order
  EXPECT_EQ(f.get("layers.0.a").dtype, Dtype::F32);
  EXPECT_EQ(f.get("layers.0.a").shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(f.get("rng").dtype, Dtype::U64);
  EXPECT_EQ(f.get("ints").dtype, Dtype::I32);
  std::vector<float> ra;
  f.read_floats("layers.0.a", ra);
  EXPECT_EQ(std::memcmp(ra.data(), a.data(), a.size() * 4), 0) << "bit for bit, NaN and Inf included";
  std::vector<double> rb;
  f.read_floats("b", rb);
  EXPECT_EQ(rb, b);
  std::vector<int64_t> rc, re;
  f.read_ints("scalar", rc);
  f.read_ints("ints", re);
  EXPECT_EQ(rc, c);
  EXPECT_EQ(re, (std::vector<int64_t>{1, -2, 3, -4}));
  std::vector<uint64_t> rd;
  f.read_u64("rng", rd);
  EXPECT_EQ(rd, d);
  EXPECT_EQ(f.meta("plain"), "value");
  EXPECT_EQ(f.meta("tricky \"key\""), "line\nbreak \\ and \xC3\xA9 and \x01");
  EXPECT_EQ(f.metadata().size(), 2u);
  expect_error([&] { f.get("nope"); }, {"has no tensor nope"});
  expect_error([&] { f.read_u64("b", rd); }, {"tensor b", "F64", "U64"});
  const std::vector<uint64_t> wrong = {6};
  expect_error([&] { f.read_floats("layers.0.a", ra, &wrong); }, {"shape [2, 3]", "[6]"});
}

TEST(Safetensors, IndependentReaderAgrees) {
  const std::string dir = scratch_dir("st_mini"), path = dir + "/t.safetensors";
  std::vector<float> w1(12);
  for (size_t i = 0; i < w1.size(); i++) w1[i] = 0.5f * i - 3;
  const std::vector<double> w2 = {1.0 / 3, 2.0 / 3};
  const std::vector<uint64_t> w3 = {42, 43, 44, 45};
  SafetensorsWriter w;
  w.add("first.weight", {3, 4}, w1.data());
  w.add("second", {2}, w2.data());
  w.add("third", {4}, w3.data());
  w.metadata("format", "test");
  w.write(path);

  const MiniSafetensors m(path);
  EXPECT_EQ(m.dtype("first.weight"), "F32");
  EXPECT_EQ(m.dtype("second"), "F64");
  EXPECT_EQ(m.dtype("third"), "U64");
  EXPECT_EQ(m.shape("first.weight"), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(m.offsets("first.weight"), (std::vector<uint64_t>{0, 48}));
  EXPECT_EQ(m.offsets("second"), (std::vector<uint64_t>{48, 64}));
  EXPECT_EQ(m.offsets("third"), (std::vector<uint64_t>{64, 96}));
  EXPECT_EQ(m.data_start + 96, m.bytes.size()) << "the data section ends the file";
  EXPECT_EQ(m.values<float>("first.weight"), w1);
  EXPECT_EQ(m.values<double>("second"), w2);
  EXPECT_EQ(m.values<uint64_t>("third"), w3);
  EXPECT_EQ(m.metadata("format"), "test");
}

TEST(Safetensors, BadFilesGetOneClearMessage) {
  const std::string dir = scratch_dir("st_bad");
  const std::string p = dir + "/x.safetensors";
  const std::string ok_entry = "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  const std::string two = f32_bytes({1, 2});

  expect_error([&] { SafetensorsFile f(dir + "/missing.safetensors", "checkpoint"); }, {"checkpoint not found", "missing"});
  write_bytes(p, "");
  expect_error([&] { SafetensorsFile f(p); }, {p, "is empty (0 bytes)"});
  write_bytes(p, "abc");
  expect_error([&] { SafetensorsFile f(p); }, {"too short"});
  write_bytes(p, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}");
  expect_error([&] { SafetensorsFile f(p); }, {"impossible header length"});
  write_bytes(p, std::string("\x40\0\0\0\0\0\0\0", 8) + "{\"t\":");
  expect_error([&] { SafetensorsFile f(p); }, {"is truncated", "header needs bytes 8..72"});

  struct Case {
    std::string header, data, needle;
  };
  const std::vector<Case> cases = {
      {"{" + ok_entry + ",}", two, "expected a string key at byte"},
      {"{" + ok_entry + "," + ok_entry + "}", two, "duplicate key 't'"},
      {"[1, 2]", "", "not a JSON object"},
      {"{\"t\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", two, "unknown dtype 'F33'"},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", two, "needs 12"},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", two, "not a non-negative integer"},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", two, "begin <= end"},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", two, "needs dtype, shape and data_offsets"},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", two, "unknown field 'x'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
       two, "overlaps"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", two, "gap in the data before tensor 'a'"},
      {"{\"__metadata__\":{\"k\":1}," + ok_entry + "}", two, "metadata value of 'k' is not a string"},
      {"{" + ok_entry + "}", two + "xx", "2 unexpected bytes after its last tensor"},
      {"{" + ok_entry + "}", two.substr(0, 5),
       "is truncated: tensor 't' needs bytes " + std::to_string(8 + 64) + ".." + std::to_string(8 + 64 + 8) +
           " but the file has " + std::to_string(8 + 64 + 5)},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.header);
    std::string h = c.header;
    if (c.needle.find("is truncated") != std::string::npos) h.resize(64, ' ');  // offsets in the needle assume 64
    write_raw(p, h, c.data);
    expect_error([&] { SafetensorsFile f(p, "checkpoint"); }, {"checkpoint " + p, c.needle});
  }
}

TEST(Safetensors, FailedWriteLeavesTheOldFileIntact) {
  const std::string dir = scratch_dir("st_atomic"), path = dir + "/m.safetensors";
  const std::vector<float> v = {1, 2, 3};
  SafetensorsWriter w;
  w.add("v", {3}, v.data());
  w.write(path);
  const std::string good = read_bytes(path);
  // The disk fills up while the new version is written: PATH.tmp is /dev/full.
  ASSERT_EQ(::symlink("/dev/full", (path + ".tmp").c_str()), 0);
  const std::vector<float> v2(1000, 7.f);
  SafetensorsWriter w2;
  w2.add("v", {1000}, v2.data());
  expect_error([&] { w2.write(path); }, {"cannot write " + path, "No space left on device"});
  EXPECT_EQ(read_bytes(path), good);
  EXPECT_FALSE(exists(path + ".tmp"));
  // A folder that does not exist.
  expect_error([&] { w.write(dir + "/no/such/dir/x.safetensors"); }, {"cannot write", "No such file or directory"});
}

// ---- JSON --------------------------------------------------------------------

TEST(Json, ParsesStrictJson) {
  const Json j = parse_json(
      " {\"a\": [1, -2.5e3, 0, true, false, null], \"s\": \"\\u00e9\\ud83d\\ude00\\n\\\"\", \"o\": {}} ", "test");
  ASSERT_TRUE(j.is(Json::Type::Object));
  const Json* a = j.find("a");
  ASSERT_TRUE(a && a->is(Json::Type::Array));
  ASSERT_EQ(a->items.size(), 6u);
  EXPECT_EQ(a->items[1].number, -2500);
  uint64_t u;
  EXPECT_TRUE(a->items[0].to_u64(&u));
  EXPECT_EQ(u, 1u);
  EXPECT_FALSE(a->items[1].to_u64(&u));
  EXPECT_TRUE(a->items[3].boolean);
  EXPECT_TRUE(a->items[5].is(Json::Type::Null));
  EXPECT_EQ(j.find("s")->text, "\xC3\xA9\xF0\x9F\x98\x80\n\"");
  EXPECT_TRUE(j.find("o")->members.empty());
  EXPECT_EQ(j.find("missing"), nullptr);
  EXPECT_FALSE(parse_json("18446744073709551616", "t").to_u64(&u)) << "2^64 overflows";
  EXPECT_TRUE(parse_json("18446744073709551615", "t").to_u64(&u));
  EXPECT_EQ(u, UINT64_MAX);
}

TEST(Json, RejectsWhatIsNotJson) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"a\":1,}", "expected a string key"},
      {"[1,]", "unexpected character ']'"},
      {"01", "leading zero"},
      {"NaN", "unexpected character 'N'"},
      {"-", "invalid number"},
      {"1.e5", "invalid number"},
      {"{\"a\":1} x", "unexpected text after"},
      {"\"tab\there\"", "control character"},
      {"\"\\x\"", "invalid escape"},
      {"\"\\ud800\"", "unpaired surrogate"},
      {"\"abc", "unterminated string"},
      {"{\"a\" 1}", "expected ':'"},
      {"\"\xff\"", "invalid UTF-8"},
      {std::string(100, '['), "nesting deeper"},
      {"", "unexpected end of input"},
  };
  for (auto& [text, needle] : bad) {
    SCOPED_TRACE(text);
    expect_error([&] { parse_json(text, "src"); }, {"src: ", needle, "at byte"});
  }
}

// ---- checkpoints ---------------------------------------------------------------

namespace {

using Cpu = CpuBackend<float>;

struct Built {
  std::unique_ptr<Method<Cpu>> method;
  std::unique_ptr<Model<Cpu>> model;
};

Built build(Cpu& be, const ModelMeta& meta, uint64_t seed) {
  Built b;
  b.method = make_method<Cpu>(meta.method, meta.method_opts);
  b.model = make_model(be, meta.cfg, *b.method);
  b.model->init_params(seed);
  return b;
}

ModelMeta toy_meta(const std::string& method = "ponder", long long step = 7) {
  ModelMeta m;
  m.cfg = preset_config("test");
  m.method = method;
  m.method_opts.ponder_steps = 2;
  m.tokenizer = "bytes";
  m.step = step;
  return m;
}

TrainState toy_state(long long step) {
  TrainState st;
  st.step = step;
  st.data_rng = {1, 2, 3, 0xFFFFFFFFFFFFFFFFull};
  st.train_tokens = 2700;
  st.tokens = 1234, st.flops = 5.5e9, st.other_flops = 2.5e8, st.seconds = 3.25;
  st.schedule = CosineSchedule{3e-3, 0.1, 5, 30};
  st.options = {{"lr", "0.0030000000000000001"}, {"data", "some file.txt"}};
  return st;
}

// Saves a checkpoint of `b` at meta.step with moments m = 0.5 p, v = p^2.
std::string save(Built& b, const std::string& out, const ModelMeta& meta) {
  const size_t n = b.model->num_params();
  std::vector<float> m(n), v(n);
  for (size_t i = 0; i < n; i++) m[i] = 0.5f * b.model->params.data()[i], v[i] = b.model->params.data()[i] * b.model->params.data()[i];
  return save_checkpoint(out, *b.model, meta, toy_state(meta.step), m.data(), v.data());
}

}  // namespace

TEST(Checkpoint, SaveAndLoadRoundTrip) {
  const std::string out = scratch_dir("ck_roundtrip");
  Cpu be;
  const ModelMeta meta = toy_meta("ponder", 7);
  Built a = build(be, meta, 5);
  const std::string dir = save(a, out, meta);
  EXPECT_EQ(dir, out + "/ckpt_7");
  EXPECT_EQ(read_bytes(out + "/latest"), "ckpt_7\n");
  EXPECT_FALSE(exists(out + "/ckpt_7.tmp"));

  // Model and method rebuilt from the checkpoint alone.
  auto ck = load_checkpoint_model(be, out);
  EXPECT_EQ(ck.dir, out + "/ckpt_7");
  EXPECT_EQ(ck.meta.method, "ponder");
  EXPECT_EQ(ck.meta.method_opts.ponder_steps, 2);
  EXPECT_EQ(ck.meta.cfg.describe(), meta.cfg.describe());
  EXPECT_EQ(ck.meta.cfg.rope_theta, meta.cfg.rope_theta);
  EXPECT_EQ(ck.meta.cfg.norm_eps, meta.cfg.norm_eps);
  EXPECT_EQ(ck.meta.tokenizer, "bytes");
  EXPECT_EQ(ck.meta.step, 7);
  ASSERT_EQ(ck.model->num_params(), a.model->num_params());
  EXPECT_EQ(std::memcmp(ck.model->params.data(), a.model->params.data(), a.model->num_params() * 4), 0);

  // Training state.
  const size_t n = a.model->num_params();
  std::vector<float> m(n), v(n);
  const TrainState st = load_train_state(be, dir, n, 7, m.data(), v.data());
  for (size_t i = 0; i < n; i++) {
    ASSERT_EQ(m[i], 0.5f * a.model->params.data()[i]);
    ASSERT_EQ(v[i], a.model->params.data()[i] * a.model->params.data()[i]);
  }
  const TrainState want = toy_state(7);
  EXPECT_EQ(st.step, 7);
  EXPECT_EQ(st.data_rng, want.data_rng);
  EXPECT_EQ(st.train_tokens, want.train_tokens);
  EXPECT_EQ(st.tokens, want.tokens);
  EXPECT_EQ(st.flops, want.flops);
  EXPECT_EQ(st.other_flops, want.other_flops);
  EXPECT_EQ(st.seconds, want.seconds);
  EXPECT_EQ(st.schedule.lr, want.schedule.lr);
  EXPECT_EQ(st.schedule.min_frac, want.schedule.min_frac);
  EXPECT_EQ(st.schedule.warmup, want.schedule.warmup);
  EXPECT_EQ(st.schedule.total, want.schedule.total);
  auto options = read_train_options(dir), want_options = want.options;
  std::sort(options.begin(), options.end());
  std::sort(want_options.begin(), want_options.end());
  EXPECT_EQ(options, want_options);

  // The double backend loads the same (float) parameters.
  CpuBackend<double> bd;
  auto ckd = load_checkpoint_model(bd, dir + "/model.safetensors");
  for (size_t i = 0; i < n; i++) ASSERT_EQ(ckd.model->params.data()[i], (double)a.model->params.data()[i]);
}

// Every tensor and metadata key, read by the independent reader.
TEST(Checkpoint, FilesAreReadableByAnIndependentReader) {
  const std::string out = scratch_dir("ck_mini");
  Cpu be;
  ModelMeta meta = toy_meta("pause", 3);
  meta.cfg.tied = true;
  Built a = build(be, meta, 9);
  const std::string dir = save(a, out, meta);
  const MiniSafetensors m(dir + "/model.safetensors");
  for (auto& t : a.model->layout.tensors()) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(m.dtype(t.name), "F32");
    EXPECT_EQ(m.shape(t.name), std::vector<uint64_t>(t.shape.begin(), t.shape.end()));
    const auto vals = m.values<float>(t.name);
    ASSERT_EQ(vals.size(), t.numel);
    EXPECT_EQ(std::memcmp(vals.data(), a.model->params.data() + t.offset, t.numel * 4), 0);
  }
  EXPECT_EQ(m.header.find("\"output.weight\""), std::string::npos) << "tied: no separate head";
  EXPECT_NE(m.header.find("\"pause.embedding\":{"), std::string::npos) << "the method's own tensors too";
  EXPECT_EQ(m.metadata("format"), "ada-checkpoint");
  EXPECT_EQ(m.metadata("config.vocab"), "23");
  EXPECT_EQ(m.metadata("config.tied"), "1");
  EXPECT_EQ(m.metadata("method"), "pause");
  EXPECT_EQ(m.metadata("method.pauses"), "3");

  const MiniSafetensors s(dir + "/state.safetensors");
  EXPECT_EQ(s.dtype("adamw.m"), "F32");
  EXPECT_EQ(s.shape("adamw.v"), (std::vector<uint64_t>{a.model->num_params()}));
  EXPECT_EQ(s.values<int64_t>("step"), (std::vector<int64_t>{3}));
  EXPECT_EQ(s.values<uint64_t>("data.rng"), (std::vector<uint64_t>{1, 2, 3, 0xFFFFFFFFFFFFFFFFull}));
  EXPECT_EQ(s.values<double>("schedule.lr"), (std::vector<double>{3e-3}));
  EXPECT_EQ(s.metadata("option.data"), "some file.txt");
}

TEST(Checkpoint, ResolvesRunAndCheckpointDirectories) {
  const std::string out = scratch_dir("ck_resolve");
  Cpu be;
  ModelMeta meta = toy_meta("standard", 1);
  Built a = build(be, meta, 1);
  save(a, out, meta);
  meta.step = 2;
  save(a, out, meta);
  EXPECT_EQ(resolve_checkpoint(out), out + "/ckpt_2");
  EXPECT_EQ(resolve_checkpoint(out + "/"), out + "/ckpt_2");
  EXPECT_EQ(resolve_checkpoint(out + "/ckpt_1"), out + "/ckpt_1");
  EXPECT_EQ(resolve_checkpoint(out + "/ckpt_1/model.safetensors"), out + "/ckpt_1");
  EXPECT_EQ(checkpoint_run_dir(out + "/ckpt_1"), out);

  expect_error([&] { resolve_checkpoint(out + "/nothing"); }, {"checkpoint not found", "nothing"});
  const std::string empty = scratch_dir("ck_resolve_empty");
  expect_error([&] { resolve_checkpoint(empty); }, {empty, "is not a checkpoint", "latest", "model.safetensors"});
  // `latest` naming a missing step: the newest complete checkpoint (a note
  // says so); with none left, an error.
  write_bytes(out + "/latest", "ckpt_9\n");
  EXPECT_EQ(resolve_checkpoint(out), out + "/ckpt_2");
  ASSERT_EQ(std::system(("rm -r " + out + "/ckpt_1 " + out + "/ckpt_2").c_str()), 0);
  expect_error([&] { resolve_checkpoint(out); }, {"latest names 'ckpt_9'", "does not exist", "no other complete checkpoint"});
  write_bytes(out + "/latest", "");
  expect_error([&] { resolve_checkpoint(out); }, {"latest is empty"});
}

TEST(Checkpoint, MismatchedModelIsRejectedNamingTheDifference) {
  const std::string out = scratch_dir("ck_mismatch");
  Cpu be;
  const ModelMeta meta = toy_meta("ponder", 4);
  Built a = build(be, meta, 2);
  const std::string dir = save(a, out, meta);
  SafetensorsFile f(dir + "/model.safetensors", "checkpoint");
  auto load_into = [&](const ModelMeta& want) {
    Built b = build(be, want, 3);
    load_params(*b.model, want, f);
  };
  ModelMeta w = meta;
  w.cfg.vocab = 31;
  expect_error([&] { load_into(w); }, {dir + "/model.safetensors has vocabulary 23 but the model was configured with 31"});
  w = meta, w.cfg.dim = 32, w.cfg.heads = 2;
  expect_error([&] { load_into(w); }, {"width (dim) 16 but the model was configured with 32"});
  w = meta, w.cfg.layers = 3;
  expect_error([&] { load_into(w); }, {"layers 2 but the model was configured with 3"});
  w = meta, w.cfg.tied = true;
  expect_error([&] { load_into(w); }, {"untied output head but the model was configured tied"});
  w = meta, w.method = "looped";
  expect_error([&] { load_into(w); }, {"trained with method ponder but the model is configured for looped"});
  w = meta, w.method_opts.ponder_steps = 3;
  expect_error([&] { load_into(w); }, {"--ponder-steps 2 but the model was configured with 3"});
}

TEST(Checkpoint, ForgedTensorsAreRejected) {
  const std::string dir = scratch_dir("ck_forged");
  Cpu be;
  ModelMeta meta = toy_meta("standard", 1);
  meta.method_opts = MethodOptions();  // the forged files record no method options: the defaults
  Built a = build(be, meta, 2);
  // Same metadata, different tensors: write model files by hand.
  auto forge = [&](const std::string& drop, const std::string& reshape, const std::string& extra) {
    SafetensorsWriter w;
    for (auto& kv : {std::pair<std::string, std::string>{"format", "ada-checkpoint"}, {"format_version", "1"},
                     {"kind", "model"}, {"step", "1"}, {"config.name", "test"}, {"config.vocab", "23"},
                     {"config.dim", "16"}, {"config.layers", "2"}, {"config.heads", "2"}, {"config.hidden", "24"},
                     {"config.max_seq", "64"}, {"config.tied", "0"}, {"config.rope_theta", "10000"},
                     {"config.norm_eps", "1.0000000000000001e-05"}, {"method", "standard"}, {"tokenizer", "bytes"}})
      w.metadata(kv.first, kv.second);
    for (auto& t : a.model->layout.tensors()) {
      if (t.name == drop) continue;
      std::vector<uint64_t> shape(t.shape.begin(), t.shape.end());
      if (t.name == reshape) shape = {t.numel};
      w.add(t.name, shape, a.model->params.data() + t.offset);
    }
    const float x = 1;
    if (!extra.empty()) w.add(extra, {1}, &x);
    w.write(dir + "/model.safetensors");
  };
  auto load = [&] {
    Built b = build(be, meta, 3);
    load_params(*b.model, meta, SafetensorsFile(dir + "/model.safetensors", "checkpoint"));
  };
  forge("", "", "");
  load();  // the forged file itself is fine
  forge("layers.1.attn.wo.weight", "", "");
  expect_error(load, {"has no tensor layers.1.attn.wo.weight (the model needs it)"});
  forge("", "layers.0.mlp.w_down.weight", "");
  expect_error(load, {"tensor layers.0.mlp.w_down.weight of shape [384] but the model expects [16, 24]"});
  forge("", "", "gate.weight");
  expect_error(load, {"has tensor 'gate.weight', which the model does not have"});
  write_raw(dir + "/model.safetensors", "{\"__metadata__\":{\"format\":\"other\"}}   ", "");
  expect_error(load, {"is not an ada checkpoint"});
}

TEST(Checkpoint, TruncatedOrEmptyFilesAreRejected) {
  const std::string out = scratch_dir("ck_trunc");
  Cpu be;
  const ModelMeta meta = toy_meta("standard", 1);
  Built a = build(be, meta, 2);
  const std::string dir = save(a, out, meta);
  const std::string model = dir + "/model.safetensors", state = dir + "/state.safetensors";
  const std::string full = read_bytes(model);
  write_bytes(model, full.substr(0, full.size() - 100));
  expect_error([&] { load_checkpoint_model(be, out); },
               {"checkpoint " + model + " is truncated: tensor ", " needs bytes ",
                "but the file has " + std::to_string(full.size() - 100)});
  write_bytes(model, "");
  expect_error([&] { load_checkpoint_model(be, out); }, {model, "is empty (0 bytes)"});
  write_bytes(model, full);
  const std::string st = read_bytes(state);
  write_bytes(state, st.substr(0, st.size() / 2));
  std::vector<float> m(a.model->num_params()), v(m.size());
  expect_error([&] { load_train_state(be, dir, m.size(), 1, m.data(), v.data()); }, {state, "is truncated"});
  std::remove(state.c_str());
  expect_error([&] { load_train_state(be, dir, m.size(), 1, m.data(), v.data()); }, {"checkpoint not found", state});
}

TEST(Checkpoint, FailedSaveNeverDamagesThePreviousCheckpoint) {
  const std::string out = scratch_dir("ck_failsave");
  Cpu be;
  ModelMeta meta = toy_meta("standard", 10);
  Built a = build(be, meta, 2);
  save(a, out, meta);
  const std::string m10 = read_bytes(out + "/ckpt_10/model.safetensors");
  const std::string s10 = read_bytes(out + "/ckpt_10/state.safetensors");
  auto intact = [&] {
    EXPECT_EQ(read_bytes(out + "/ckpt_10/model.safetensors"), m10);
    EXPECT_EQ(read_bytes(out + "/ckpt_10/state.safetensors"), s10);
    EXPECT_EQ(read_bytes(out + "/latest"), "ckpt_10\n");
    EXPECT_EQ(resolve_checkpoint(out), out + "/ckpt_10");
  };

  // 1. The disk is full when the `latest` pointer is written (the last write).
  ASSERT_EQ(::symlink("/dev/full", (out + "/latest.tmp").c_str()), 0);
  meta.step = 20;
  expect_error([&] { save(a, out, meta); }, {"cannot write " + out + "/latest", "No space left on device"});
  intact();
  EXPECT_FALSE(exists(out + "/latest.tmp"));

  // 2. Non-finite parameters are never saved.
  a.model->params.data()[3] = NAN;
  meta.step = 30;
  expect_error([&] { save(a, out, meta); }, {"refusing to save a checkpoint at step 30", "is not finite"});
  EXPECT_FALSE(exists(out + "/ckpt_30"));
  intact();
  a.model->params.data()[3] = 0;

  // 3. The checkpoint folder cannot be created (a file is in the way of the output directory).
  write_bytes(out + "/blocked", "x");
  expect_error([&] { save(a, out + "/blocked", meta); }, {"cannot create the output directory " + out + "/blocked"});
  intact();

  // 4. An unwritable output directory (only meaningful without root's override).
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(out.c_str(), 0555), 0);
    meta.step = 40;
    expect_error([&] { save(a, out, meta); }, {"cannot create checkpoint directory"});
    ASSERT_EQ(::chmod(out.c_str(), 0755), 0);
    intact();
  }
}
