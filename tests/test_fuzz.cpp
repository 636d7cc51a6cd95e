// Fuzzing what users feed the programs: a seeded mutator over a valid
// checkpoint, token shards, tokenizer files, text and flag lists. Every case
// runs one program as a subprocess and must end either in success or in one
// clear error (exit status 1, "error: ..." first on stderr, at most a "HINT:"
// line after it, every line printable and short), within a time limit and,
// outside sanitizer builds, a memory limit; the good run it started from must
// stay byte-identical. Inputs that are certainly broken (a truncated tensor
// file, a token id the model does not have, a wrong shard magic) must be
// refused, not accepted silently.
//
//   make test   ADA_FUZZ_CASES cases (default 240), about a minute on 2 cores
//   make fuzz   ADA_FUZZ_CASES=3000, and ADA_FUZZ_SEED to vary the draw
//
// A failing case prints its kind, number and command line; its inputs stay in
// the scratch folder printed with it, so it can be re-run by hand.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/rng.h"
#include "text/shards.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

long long env_int(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

// How a case ended, judged from the exit status and stderr.
std::string judge(const ProgramResult& r, bool must_fail) {
  if (r.status == 137 || r.status == 124) return "hang: killed by the time limit";
  if (r.status < 0) return "crash: killed by a signal";
  if (r.status == 86) return "sanitizer report";
  if (r.status > 128) return "crash: signal " + std::to_string(r.status - 128);
  if (r.status != 0 && r.status != 1) return "exit status " + std::to_string(r.status);
  if (r.status == 0) return must_fail ? "silent acceptance of a broken input" : "";
  if (r.err.rfind("error: ", 0) != 0) return "no 'error: ' line first on stderr";
  int lines = 0;
  size_t start = 0;
  while (start < r.err.size()) {
    size_t end = r.err.find('\n', start);
    if (end == std::string::npos) end = r.err.size();
    const std::string line = r.err.substr(start, end - start);
    lines++;
    if (lines == 2 && line.rfind("HINT: ", 0) != 0) return "more than one error line";
    if (lines > 2) return "more than one error line";
    if (line.size() > 400) return "an error line of " + std::to_string(line.size()) + " bytes";
    for (unsigned char c : line)
      if (c < 0x20 || c == 0x7f) return "an unprintable byte in the error line";
    start = end + 1;
  }
  return "";
}

// ---- the mutator -------------------------------------------------------------------

// Byte-level damage anywhere in a file: bit flips, overwritten runs, cuts,
// garbage appended, a block copied elsewhere.
std::string damage_bytes(std::string s, Rng& r) {
  if (s.empty()) return std::string(1 + r.below(64), '\xff');
  switch (r.below(5)) {
    case 0:
      for (int i = 0, n = 1 + (int)r.below(8); i < n; i++) s[r.below(s.size())] ^= char(1u << r.below(8));
      break;
    case 1: {
      const size_t at = r.below(s.size()), n = std::min<size_t>(1 + r.below(16), s.size() - at);
      const char fill = "\x00\xff\x7f\x80"[r.below(4)];
      for (size_t i = 0; i < n; i++) s[at + i] = r.below(2) ? fill : char(r.below(256));
      break;
    }
    case 2: s.resize(r.below(s.size())); break;
    case 3: s += std::string(1 + r.below(4096), char(r.below(256))); break;
    default: {
      const size_t from = r.below(s.size()), to = r.below(s.size());
      const size_t n = std::min<size_t>({1 + r.below(64), s.size() - from, s.size() - to});
      s.replace(to, n, s.substr(from, n));
    }
  }
  return s;
}

// Numbers that break assumptions: zero, negatives, fractions, exponents, the
// edges of 32 and 64 bits, not-a-numbers, empty and text.
std::string odd_number(Rng& r) {
  static const char* v[] = {"0", "-1", "1.5", "1e30", "-1e300", "2147483647", "2147483648", "4294967296",
                            "9223372036854775807", "18446744073709551616", "nan", "inf", "", "abc", "0x10",
                            "1e-3", "100000", "+3", " 7", "3 "};
  return v[r.below(sizeof v / sizeof *v)];
}

// Whether a value is certainly wrong for a numeric flag: not a number at all,
// or, for a flag that counts something, not a plain integer in range.
bool certainly_invalid(const std::string& flag, const std::string& v) {
  static const char* real_flags[] = {"--lr", "--val-fraction", "--weight-decay", "--temperature"};
  bool real = false;
  for (auto* f : real_flags) real = real || flag == f;
  if (v.empty() || v == "abc" || v == "nan" || v == "inf") return true;
  if (real) return false;
  return v == "1.5" || v == "1e30" || v == "-1e300" || v == "1e-3" || v == "0x10" || v == "18446744073709551616";
}

// A safetensors file damaged in its JSON header, where the structure is: a
// number replaced by an odd one, a string value replaced, an entry removed or
// duplicated. The 8-byte length is rewritten to match half of the time, so the
// damage reaches the checks behind the JSON parser.
std::string damage_safetensors(const std::string& file, Rng& r) {
  if (file.size() < 8) return damage_bytes(file, r);
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  if (n > file.size() - 8) return damage_bytes(file, r);
  std::string h = file.substr(8, n), body = file.substr(8 + n);
  for (int k = 0, edits = 1 + (int)r.below(3); k < edits; k++) {
    const size_t at = r.below(h.size());
    switch (r.below(4)) {
      case 0: {  // a number
        const size_t b = h.find_first_of("0123456789", at);
        if (b == std::string::npos) break;
        const size_t e = h.find_first_not_of("0123456789", b);
        h.replace(b, e - b, odd_number(r));
        break;
      }
      case 1: {  // a string value: "key":"value"
        const size_t b = h.find("\":\"", at);
        if (b == std::string::npos) break;
        const size_t e = h.find('"', b + 3);
        if (e == std::string::npos) break;
        static const char* s[] = {"", "F16", "I64", "100000", "-5", "nope", "0.5", "\\u0000", "1e9"};
        h.replace(b + 3, e - b - 3, s[r.below(sizeof s / sizeof *s)]);
        break;
      }
      case 2: {  // remove an entry "key":value,
        const size_t b = h.find(",\"", at);
        if (b == std::string::npos) break;
        const size_t e = h.find(",\"", b + 2);
        if (e == std::string::npos) break;
        h.erase(b, e - b);
        break;
      }
      default: {  // duplicate an entry
        const size_t b = h.find(",\"", at);
        if (b == std::string::npos) break;
        const size_t e = h.find(",\"", b + 2);
        if (e == std::string::npos) break;
        h.insert(b, h.substr(b, e - b));
      }
    }
  }
  uint64_t m = r.below(2) ? h.size() : n;
  std::string out(8, '\0');
  std::memcpy(&out[0], &m, 8);
  return out + h + body;
}

// ---- the fixture: one good run and its inputs ----------------------------------------

struct Fixture {
  std::string dir, run, text, shards, bpe, train_cpu, eval, gen, tokenize;
  std::map<std::string, std::string> good;  // run file -> bytes
};

const char* kRunFiles[] = {"latest", "ckpt_4/model.safetensors", "ckpt_4/state.safetensors", "metrics.jsonl"};

class Fuzz : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    Fixture f;
    f.train_cpu = program("train_cpu"), f.eval = program("eval"), f.gen = program("generate");
    f.tokenize = program("tokenize");
    if (f.train_cpu.empty() || f.eval.empty() || f.gen.empty() || f.tokenize.empty()) return;
    f.dir = scratch_dir("fuzz");
    f.run = f.dir + "/run", f.text = f.dir + "/text.txt", f.shards = f.dir + "/shards", f.bpe = f.dir + "/bpe.txt";
    std::string t;
    for (int i = 0; i < 80; i++) t += "In the beginning God created the heaven and the earth. " + std::to_string(i * 7) + "\n";
    write_bytes(f.text, t);
    ProgramResult r = run_program(f.train_cpu + " --config test --vocab 256 --tokenizer bytes --data " + f.text +
                                      " --steps 4 --batch 2 --seq 16 --eval-every 2 --eval-batches 1 --save-every 2 --out " +
                                      f.run, f.dir);
    ASSERT_EQ(r.status, 0) << r.err;
    r = run_program(f.tokenize + " --tokenizer bytes --out-dir " + f.shards + " --name text " + f.text, f.dir);
    ASSERT_EQ(r.status, 0) << r.err;
    r = run_program(f.tokenize + " --train-bpe 300 --bpe-out " + f.bpe + " " + f.text, f.dir);
    ASSERT_EQ(r.status, 0) << r.err;
    for (auto* name : kRunFiles) f.good[name] = read_bytes(f.run + "/" + name);
    fixture_ = new Fixture(std::move(f));
  }
  static void TearDownTestSuite() {
    delete fixture_;
    fixture_ = nullptr;
  }
  static Fixture* fixture_;
};
Fixture* Fuzz::fixture_ = nullptr;

struct Case {
  std::string kind, cmd;
  bool must_fail = false;
};

// A copy of the good run, for a case that damages it.
std::string copy_run(const Fixture& f, const std::string& to) {
  EXPECT_EQ(std::system(("rm -rf '" + to + "' && cp -r '" + f.run + "' '" + to + "'").c_str()), 0);
  return to;
}

Case make_case(const Fixture& f, int i, Rng& r) {
  const std::string cd = f.dir + "/case_" + std::to_string(i);
  EXPECT_EQ(std::system(("rm -rf '" + cd + "' && mkdir -p '" + cd + "'").c_str()), 0);
  const std::string small = " --batch 2 --seq 16 --batches 1";
  switch (i % 9) {
    case 0: {  // a checkpoint file damaged in its bytes, evaluated
      const std::string run = copy_run(f, cd + "/run");
      const std::string file = run + (r.below(2) ? "/ckpt_4/model.safetensors" : "/ckpt_4/state.safetensors");
      const std::string good = read_bytes(file), bad = damage_bytes(good, r);
      write_bytes(file, bad);
      // A cut file is certainly broken; any other change may still be a valid file.
      return {"checkpoint bytes (eval)", f.eval + " --ckpt " + run + small, bad.size() < good.size()};
    }
    case 1: {  // a checkpoint header damaged in its structure, evaluated or resumed
      const std::string run = copy_run(f, cd + "/run");
      const std::string file = run + (r.below(3) ? "/ckpt_4/model.safetensors" : "/ckpt_4/state.safetensors");
      write_bytes(file, damage_safetensors(read_bytes(file), r));
      if (r.below(2)) return {"checkpoint header (eval)", f.eval + " --ckpt " + run + small};
      return {"checkpoint header (resume)", f.train_cpu + " --resume " + run + " --steps 5"};
    }
    case 2: {  // `latest` replaced
      const std::string run = copy_run(f, cd + "/run");
      static const char* v[] = {"", "ckpt_9\n", "ckpt_-1\n", "../../etc\n", "ckpt_2", "ckpt_4\0x\n", "ckpt_99999999999999999999\n",
                                "\xff\xfe\n", "ckpt_2\nckpt_4\n"};
      std::string s = r.below(4) ? std::string(v[r.below(sizeof v / sizeof *v)]) : std::string(1 + r.below(6000), 'x');
      if (s == "ckpt_4") s += std::string("\0x\n", 3);
      write_bytes(run + "/latest", s);
      return {"latest", (r.below(2) ? f.eval + " --ckpt " + run + small : f.train_cpu + " --resume " + run + " --steps 5")};
    }
    case 3: {  // a token shard damaged, evaluated on
      const std::string shard = f.shards + "/text_val_000000.bin";
      std::string s = read_bytes(shard);
      bool broken = false;
      if (r.below(2) && s.size() > 1024 + 8) {  // a header word or a token id
        if (r.below(2)) {
          const size_t w = r.below(4);
          const uint32_t x = (uint32_t)r.below(2) ? 0xffffffffu : (uint32_t)r.below(1u << 31);
          std::memcpy(&s[4 * w], &x, 4);
          broken = w == 0 || w == 1 || w == 2;  // magic, version, count (a random one is almost never right)
        } else {
          const size_t k = 1024 + 2 * r.below((s.size() - 1024) / 2);
          const uint16_t id = uint16_t(256 + r.below(65536 - 256));  // the model has 256 tokens
          std::memcpy(&s[k], &id, 2);
          broken = true;
        }
      } else {
        const std::string good = s;
        s = damage_bytes(s, r);
        broken = s.size() != good.size();
      }
      write_bytes(cd + "/v_val_000000.bin", s);
      return {"shard", f.eval + " --ckpt " + f.run + " --data " + cd + "/v_val_000000.bin" + small, broken};
    }
    case 4: {  // a BPE file damaged, used to tokenize
      std::string s = read_bytes(f.bpe);
      if (r.below(3) == 0) {
        s = damage_bytes(s, r);
      } else {  // a line replaced: odd numbers, a merge bomb, a repeated line
        std::vector<std::string> lines;
        size_t a = 0;
        while (a < s.size()) {
          size_t b = s.find('\n', a);
          if (b == std::string::npos) b = s.size();
          lines.push_back(s.substr(a, b - a));
          a = b + 1;
        }
        const size_t k = r.below(lines.size());
        switch (r.below(4)) {
          case 0: lines[k] = odd_number(r) + " " + odd_number(r); break;
          case 1: lines.insert(lines.begin() + k, lines[k]); break;
          case 2: lines.erase(lines.begin() + k); break;
          default:
            for (int j = 0; j < 40; j++) lines.push_back(std::to_string(j == 0 ? 97 : 299 + j) + " " + std::to_string(j == 0 ? 97 : 299 + j));
        }
        s.clear();
        for (auto& l : lines) s += l + "\n";
      }
      write_bytes(cd + "/bpe.txt", s);
      return {"tokenizer file", f.tokenize + " --tokenizer " + cd + "/bpe.txt --out-dir " + cd + "/out " + f.text};
    }
    case 5: {  // text: invalid UTF-8, NULs, long lines; tokenized and used as a prompt
      std::string s = damage_bytes(read_bytes(f.text).substr(0, 2000), r);
      if (r.below(3) == 0) s += std::string(1 + r.below(100000), 'a');
      write_bytes(cd + "/t.txt", s);
      if (r.below(2)) return {"text (tokenize)", f.tokenize + " --tokenizer bytes --out-dir " + cd + "/out " + cd + "/t.txt"};
      return {"text (generate prompt)", f.gen + " --ckpt " + f.run + " --max-tokens 4 --prompt \"$(head -c 40 " + cd +
                                            "/t.txt | tr -d '\\000')\""};
    }
    case 6: {  // flags of train_cpu: the last --steps wins, so an accepted run stays short
      static const char* flags[] = {"--batch", "--seq", "--steps", "--lr", "--warmup", "--threads", "--seed", "--pauses",
                                    "--ponder-steps", "--layers", "--dim", "--heads", "--hidden", "--max-seq",
                                    "--val-fraction", "--eval-every", "--save-every", "--accum", "--vocab", "--weight-decay"};
      std::string cmd = f.train_cpu + " --config test --vocab 256 --tokenizer bytes --data " + f.text + " --batch 2 --seq 16" +
                        " --eval-every 0 --save-every 0 --out " + cd + "/run";
      bool invalid = false;
      for (int k = 0, n = 1 + (int)r.below(3); k < n; k++) {
        const std::string flag = flags[r.below(sizeof flags / sizeof *flags)], v = odd_number(r);
        invalid = invalid || certainly_invalid(flag, v);
        cmd += " " + flag + " '" + v + "'";
      }
      return {"flags (train_cpu)", cmd + " --steps 2", invalid};
    }
    case 7: {  // flags of eval and generate
      static const char* flags[] = {"--batch", "--seq", "--batches", "--threads", "--val-fraction", "--max-tokens",
                                    "--temperature", "--top-k", "--seed"};
      const bool ev = r.below(2);
      std::string cmd = ev ? f.eval + " --ckpt " + f.run + " --batches 1" : f.gen + " --ckpt " + f.run + " --prompt In --max-tokens 4";
      bool invalid = false;
      for (int k = 0, n = 1 + (int)r.below(2); k < n; k++) {
        const std::string flag = flags[r.below(sizeof flags / sizeof *flags)], v = odd_number(r);
        if (flag == "--batches" || flag == "--max-tokens") continue;  // big values are legitimate and slow
        // Only flags of the program at hand: the other's are refused as unknown anyway.
        const bool gen_only = flag == "--temperature" || flag == "--top-k", eval_only = flag == "--batch" ||
                              flag == "--seq" || flag == "--val-fraction";
        if ((ev && gen_only) || (!ev && eval_only)) continue;
        invalid = invalid || certainly_invalid(flag, v);
        cmd += " " + flag + " '" + v + "'";
      }
      return {ev ? "flags (eval)" : "flags (generate)", cmd, invalid};
    }
    default: {  // resume of the good run itself with odd flags: it must stay byte-identical when refused
      static const char* flags[] = {"--method", "--dim", "--data", "--batch", "--seq", "--lr", "--config", "--tokenizer"};
      const std::string flag = flags[r.below(sizeof flags / sizeof *flags)];
      std::string value = odd_number(r);
      if (flag == "--method") value = r.below(2) ? "ponder" : "nope";
      if (flag == "--data") value = r.below(2) ? cd + "/missing.txt" : f.bpe;
      if (flag == "--config") value = r.below(2) ? "tiny" : "nope";
      if (flag == "--tokenizer") value = r.below(2) ? "gpt2" : cd;
      // --steps 4 = the run's last step: an accepted resume has nothing to do.
      return {"resume of the good run", f.train_cpu + " --resume " + f.run + " " + flag + " '" + value + "' --steps 4"};
    }
  }
}

TEST_F(Fuzz, EveryInputEndsInSuccessOrOneClearError) {
  if (!fixture_) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const Fixture& f = *fixture_;
  const long long n = env_int("ADA_FUZZ_CASES", 240), seed = env_int("ADA_FUZZ_SEED", 1);
  Rng r((uint64_t)seed);
  // ASan's own report exits with 86, told apart from our status 1; its
  // shadow memory makes an address-space limit meaningless.
  const std::string limits = std::string("export ASAN_OPTIONS=exitcode=86:detect_leaks=0 UBSAN_OPTIONS=exitcode=86; ") +
                             (kSanitized ? "" : "ulimit -v 4000000; ") + "exec timeout -s KILL " +
                             (kSanitized ? "120 " : "30 ");
  std::map<std::string, int> cases_by_kind, failures_by_kind;
  int failures = 0;
  for (long long i = 0; i < n; i++) {
    const Case c = make_case(f, (int)i, r);
    const ProgramResult res = run_program("sh -c '" + [&] {
      std::string q;  // the command inside single quotes
      for (char ch : limits + c.cmd) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      return q;
    }() + "'", f.dir);
    cases_by_kind[c.kind]++;
    const std::string verdict = judge(res, c.must_fail);
    if (!verdict.empty()) {
      failures_by_kind[c.kind]++;
      if (++failures <= 20)
        ADD_FAILURE() << "case " << i << " (" << c.kind << "): " << verdict << "\n  command: " << c.cmd
                      << "\n  status " << res.status << ", stderr: " << res.err.substr(0, 600);
    } else {
      EXPECT_EQ(std::system(("rm -rf '" + f.dir + "/case_" + std::to_string(i) + "'").c_str()), 0);
    }
  }
  for (auto& kv : f.good) EXPECT_EQ(read_bytes(f.run + "/" + kv.first), kv.second) << "the good run's " << kv.first << " changed";
  std::printf("[ fuzz ] %lld cases (seed %lld), %d failed:", n, seed, failures);
  for (auto& kv : cases_by_kind) std::printf(" %s %d/%d;", kv.first.c_str(), failures_by_kind[kv.first], kv.second);
  std::printf("\n");
  EXPECT_EQ(failures, 0);
}

}  // namespace
