// See study_record.h.
#include "train/study_record.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/common.h"
#include "core/json.h"
#include "train/atomic_file.h"
#include "train/method_spec.h"

namespace ada {

namespace {

constexpr char kMagic[8] = {'A', 'D', 'A', 'S', 'R', 'E', 'C', '1'};

std::string num(double x) {  // exact round trip; NaN as null
  if (!std::isfinite(x)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

std::string shown(double x) {  // for messages: nan, inf as such
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

template <class T>
void put(std::string& out, const std::vector<T>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string read_whole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "cannot read the study record " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

StudyRecordKey study_record_key(const std::string& spec, const TrainOptions& o) {
  StudyRecordKey k;
  k.spec = spec, k.seed = o.seed;
  const LabelledSpec ls = labelled_spec(spec);
  k.label = ls.label, k.relabelled = ls.relabelled;
  for (auto& kv : option_values(o)) {
    static const char* const kSkip[] = {"out", "resume", "init-from", "threads", "recompute-logits", "log-every", "eval-every", "save-every"};
    bool skip = false;
    for (const char* s : kSkip) skip = skip || kv.first == s;
    // added after the committed records, whose arithmetic is that of its default
    if (kv.first == "bf16-acts" && kv.second == "0") skip = true;
    // the gate bias initialises adaponder's gates and nothing else
    if (kv.first == "gate-bias" && o.method != "adaponder") skip = true, k.ignored.push_back(kv.first);
    if (!skip) k.options.push_back(kv);
  }
  return k;
}

bool has_study_record(const std::string& dir) { return std::filesystem::exists(dir + "/record.json"); }

void save_study_record(const std::string& dir, const StudyRecordKey& key, const StudyRun& run) {
  const size_t n = run.nll.size();
  check(run.tok_passes.size() == n && run.correct.size() == n && run.position.size() == n && run.cls.size() == n,
        "study record of " + dir + ": the per-token arrays differ in length");
  std::string bin(kMagic, sizeof kMagic);
  const uint64_t n64 = n;
  bin.append(reinterpret_cast<const char*>(&n64), sizeof n64);
  std::vector<uint64_t> pos(run.position.begin(), run.position.end());
  std::vector<int32_t> cls(run.cls.begin(), run.cls.end());
  put(bin, run.nll), put(bin, run.tok_passes), put(bin, run.correct), put(bin, pos), put(bin, cls);
  write_file_atomic(dir + "/record.bin", bin);

  std::string j = "{\"format\": \"ada-study-record\", \"version\": 1,\n";
  j += " \"spec\": " + json_quote(key.spec) + ", \"seed\": " + std::to_string(key.seed) +
       ", \"tokens\": " + std::to_string(n) + ",\n \"machine\": " + json_quote(run.machine) +
       ", \"date\": " + json_quote(run.date) + ",\n \"options\": {";
  for (size_t i = 0; i < key.options.size(); i++)
    j += std::string(i ? ", " : "") + json_quote(key.options[i].first) + ": " + json_quote(key.options[i].second);
  j += "},\n";
  j += " \"val_loss\": " + num(run.val_loss) + ", \"accuracy\": " + num(run.accuracy) +
       ", \"passes\": " + num(run.passes) + ",\n";
  j += " \"train_flops\": " + num(run.train_flops) + ", \"train_seconds\": " + num(run.train_seconds) +
       ", \"train_tokens\": " + num(run.train_tokens) + ",\n";
  j += " \"infer_flops\": " + num(run.infer_flops) + ", \"infer_other\": " + num(run.infer_other) +
       ", \"infer_us\": " + num(run.infer_us) + ",\n";
  j += " \"pass_hist\": [";
  bool first = true;
  for (auto& kv : run.pass_hist) {
    j += std::string(first ? "" : ", ") + "[" + std::to_string(kv.first) + ", " + std::to_string(kv.second) + "]";
    first = false;
  }
  j += "],\n \"classes\": [";
  for (size_t i = 0; i < run.class_names.size(); i++) j += std::string(i ? ", " : "") + json_quote(run.class_names[i]);
  j += "],\n \"halting\": {";
  for (size_t i = 0; i < run.halting.size(); i++)
    j += std::string(i ? ", " : "") + json_quote(run.halting[i].first) + ": " + num(run.halting[i].second);
  j += "}}\n";
  write_file_atomic(dir + "/record.json", j);
}

void check_made_with(const std::string& what, const std::vector<std::pair<std::string, std::string>>& made,
                     const StudyRecordKey& key, bool complete) {
  const std::string again = complete ? "remove the run's record.json to train it again" : "remove the run's folder to train it again";
  for (auto& [name, value] : key.options) {
    const std::string* v = nullptr;
    for (auto& kv : made)
      if (kv.first == name) v = &kv.second;
    if (v == nullptr) {
      check(!complete, what + " has no option " + name + " (written by another version? " + again + ")");
      continue;  // a checkpoint older than the option
    }
    // made before gate bias 0 became AdaPonderLM's default (2026-12-08)
    check(!(name == "gate-bias" && *v == "4" && value == "0"),
          what + " was made with --gate-bias 4, the default until 2026-12-08, and this study has 0: to reuse it, add "
                 ":gate-bias=4:label=" + key.label + " to the spec (docs/workflow.md, \"When a default changes\")");
    check(*v == value, what + " was made with --" + name + " " + *v + ", this study has " + value +
                           " (another study's folder? " + again + ")");
  }
}

void load_study_record(const std::string& dir, const StudyRecordKey& key, StudyRun* run) {
  const std::string jpath = dir + "/record.json", bpath = dir + "/record.bin";
  const Json j = parse_json(read_whole(jpath), jpath);
  auto field = [&](const char* name) -> const Json& {
    const Json* f = j.find(name);
    check(f != nullptr, jpath + ": no \"" + std::string(name) + "\"");
    return *f;
  };
  auto text = [&](const char* name) {
    const Json& f = field(name);
    check(f.is(Json::Type::String), jpath + ": \"" + std::string(name) + "\" is not a string");
    return f.text;
  };
  auto number = [&](const char* name) {  // null: NaN (a figure that was not finite)
    const Json& f = field(name);
    if (f.is(Json::Type::Null)) return (double)NAN;
    check(f.is(Json::Type::Number), jpath + ": \"" + std::string(name) + "\" is not a number");
    return f.number;
  };
  check(text("format") == "ada-study-record", jpath + ": not a study record (format)");
  check(number("version") == 1, jpath + ": unknown study record version");
  // The record must be of this run: same spec, seed and every option (budget, data, model).
  auto same = [&](const char* name, const std::string& rec, const std::string& want) {
    check(rec == want, jpath + " was made with " + name + " " + rec + ", this study has " + want +
                           " (another study's folder? remove the run's record.json to train it again)");
  };
  const std::string rec_spec = text("spec");
  if (!key.relabelled || rec_spec == key.spec) {
    same("spec", rec_spec, key.spec);
  } else {  // relabelled: the record stands for this spec if it was made under the same label
    const std::string rec_label = labelled_spec(rec_spec).label;
    check(rec_label == key.label, jpath + " was made with spec " + rec_spec + " (label " + rec_label +
                                      "), this study has " + key.spec + " (label " + key.label + "; another study's folder?)");
  }
  same("seed", num(number("seed")), num((double)key.seed));
  const Json& opts = field("options");
  check(opts.is(Json::Type::Object), jpath + ": \"options\" is not an object");
  std::vector<std::pair<std::string, std::string>> made;
  for (auto& [name, v] : opts.members) {
    check(v.is(Json::Type::String), jpath + ": option " + name + " is not a string");
    made.push_back({name, v.text});
  }
  check_made_with(jpath, made, key, true);
  size_t compared = 0;
  for (auto& kv : made) compared += std::find(key.ignored.begin(), key.ignored.end(), kv.first) == key.ignored.end();
  check(compared == key.options.size(),
        jpath + " has options this study does not know (written by another version? remove the run's record.json to train it again)");

  const double nd = number("tokens");
  check(nd >= 0 && nd == std::floor(nd), jpath + ": \"tokens\" is not a count");
  const size_t n = (size_t)nd;
  const std::string bin = read_whole(bpath);
  const size_t want = sizeof kMagic + 8 + n * (8 + 8 + 1 + 8 + 4);
  check(bin.size() >= sizeof kMagic && std::memcmp(bin.data(), kMagic, sizeof kMagic) == 0,
        bpath + ": not a study record (magic)");
  check(bin.size() == want, bpath + ": " + std::to_string(bin.size()) + " bytes, " + std::to_string(want) +
                                " expected for " + std::to_string(n) + " tokens (truncated or corrupt)");
  uint64_t n64 = 0;
  std::memcpy(&n64, bin.data() + sizeof kMagic, 8);
  check(n64 == n, bpath + ": holds " + std::to_string(n64) + " tokens, record.json says " + std::to_string(n));

  StudyRun r;
  r.seed = key.seed, r.dir = dir;
  // machine and date came later than version 1's other fields: absent means not recorded.
  for (auto [name, dst] : {std::pair<const char*, std::string*>{"machine", &r.machine}, {"date", &r.date}})
    if (j.find(name) != nullptr) *dst = text(name);
  r.val_loss = number("val_loss"), r.accuracy = number("accuracy"), r.passes = number("passes");
  r.train_flops = number("train_flops"), r.train_seconds = number("train_seconds"), r.train_tokens = number("train_tokens");
  r.infer_flops = number("infer_flops"), r.infer_other = number("infer_other"), r.infer_us = number("infer_us");
  const Json& hist = field("pass_hist");
  check(hist.is(Json::Type::Array), jpath + ": \"pass_hist\" is not an array");
  for (const Json& e : hist.items) {
    check(e.is(Json::Type::Array) && e.items.size() == 2 && e.items[0].is(Json::Type::Number) &&
              e.items[1].is(Json::Type::Number),
          jpath + ": \"pass_hist\" entries must be [passes, tokens]");
    r.pass_hist[(long long)e.items[0].number] = (long long)e.items[1].number;
  }
  const Json& classes = field("classes");
  check(classes.is(Json::Type::Array), jpath + ": \"classes\" is not an array");
  for (const Json& c : classes.items) {
    check(c.is(Json::Type::String), jpath + ": \"classes\" holds a non-string");
    r.class_names.push_back(c.text);
  }
  const Json& halting = field("halting");
  check(halting.is(Json::Type::Object), jpath + ": \"halting\" is not an object");
  for (auto& [name, v] : halting.members) {
    check(v.is(Json::Type::Number) || v.is(Json::Type::Null), jpath + ": \"halting\"." + name + " is not a number");
    r.halting.push_back({name, v.is(Json::Type::Null) ? (double)NAN : v.number});
  }
  const char* p = bin.data() + sizeof kMagic + 8;
  auto take = [&](auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    v.resize(n);
    std::memcpy(v.data(), p, n * sizeof(T));
    p += n * sizeof(T);
  };
  std::vector<uint64_t> pos;
  std::vector<int32_t> cls;
  take(r.nll), take(r.tok_passes), take(r.correct), take(pos), take(cls);
  r.position.assign(pos.begin(), pos.end());
  r.cls.assign(cls.begin(), cls.end());
  for (size_t i = 0; i < n; i++) {
    check(r.cls[i] >= -1 && r.cls[i] < (int)r.class_names.size(),
          bpath + ": token " + std::to_string(i) + " has class " + std::to_string(r.cls[i]) + " (corrupt)");
    check(r.correct[i] <= 1, bpath + ": token " + std::to_string(i) + " has correct " + std::to_string(r.correct[i]) + " (corrupt)");
    check(std::isfinite(r.nll[i]) && r.nll[i] >= 0, bpath + ": token " + std::to_string(i) + " has NLL " +
                                                         shown(r.nll[i]) + " (corrupt)");
  }
  *run = std::move(r);
}

}  // namespace ada
