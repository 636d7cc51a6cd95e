// make_task: writes the synthetic variable-chain task of docs/tasks.md as
// llm.c token shards with a class side file beside each (docs/formats.md).
//
//   ./make_task --out data/chains                       # the defaults of docs/tasks.md
//   ./train_cpu --config tiny --vocab 256 --tokenizer bytes --data data/chains --out runs/chains
//   ./eval --ckpt runs/chains --batches 0               # per-class accuracy, NLL, passes
//
// Output: DIR/NAME_val_000000.bin, DIR/NAME_train_000000.bin, and the side
// files DIR/NAME_val_000000.cls, DIR/NAME_train_000000.cls. Everything is
// determined by --seed and the task options: the validation programs are
// drawn first, so they do not depend on --train-tokens.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "core/common.h"
#include "core/rng.h"
#include "text/chain_task.h"
#include "text/class_file.h"
#include "text/shards.h"
#include "train/flags.h"

using namespace ada;

namespace {

struct Split {
  std::vector<int32_t> tokens;
  TokenClasses classes;
};

// Writes one split's shard and side file; prints a line with its class counts.
void write_split(const std::string& dir, const std::string& name, const std::string& split, const Split& s) {
  const std::string shard = dir + "/" + name + "_" + split + "_000000.bin";
  write_shard(shard, s.tokens, 256);
  write_class_file(class_file_for(shard), s.classes);
  std::vector<size_t> count(s.classes.names.size());
  for (uint8_t c : s.classes.ids) count[c]++;
  std::printf("%-5s %s: %zu tokens (", split.c_str(), shard.c_str(), s.tokens.size());
  for (size_t c = 0; c < count.size(); c++) std::printf("%s%s %zu", c ? ", " : "", s.classes.names[c].c_str(), count[c]);
  std::printf(") + %s\n", class_file_for(shard).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    ChainTaskOptions t;
    std::string out, name = "chains";
    long long seed = 1, train_tokens = 2097152, val_tokens = 131072;
    Flags flags("make_task",
                "Writes the synthetic variable-chain task (docs/tasks.md): train and val token shards of\n"
                "one-character tokens (train with --tokenizer bytes --vocab 256) and a class side file\n"
                "beside each giving every token's difficulty class (format, name, value, hop1..hopK).");
    flags.add("--out", &out, "output folder (created if missing; required)");
    flags.add("--name", &name, "file name prefix: NAME_train_000000.bin, NAME_val_000000.bin, ...");
    flags.add("--seed", &seed, "random seed: the same seed and options give the same bytes", 0, LLONG_MAX);
    flags.add("--train-tokens", &train_tokens, "training tokens (rounded down to whole programs, at least one)", 1,
              INT32_MAX);
    flags.add("--val-tokens", &val_tokens, "validation tokens (rounded down to whole programs, at least one)", 1,
              INT32_MAX);
    flags.section("the task (docs/tasks.md)");
    flags.add("--assignments", &t.assignments, "assignments per program (distinct one-letter variables)", 1, 26);
    flags.add("--chains", &t.chains, "chains per program (roots); the longest chain is assignments - chains + 1", 1, 26);
    flags.add("--queries", &t.queries, "variables asked per program (distinct), each answered by its root's digit", 1,
              26);
    flags.add("--letters", &t.letters, "names are distinct letters drawn from the first N of a..z (N >= assignments)",
              1, 26);
    flags.add("--split", &t.split, "how the assignments are split into chains: random (uniform split into positive parts) | equal (every chain assignments / chains long: no answer can be found by elimination more cheaply than by its chain; docs/tasks.md)");
    flags.add("--grammar", &t.grammar, "fused (one token per assignment, one per \"?v=\": a lookup is one attention step; at most 7 letters) | equals (\"v=d;\" and \"?v=d\", one character per token) | compact (\"vd;\" and \"?vd\")");
    if (!flags.parse(argc, argv)) return 0;
    check(flags.positional().empty(), "make_task takes no positional arguments (got '" +
                                          (flags.positional().empty() ? "" : flags.positional()[0]) + "')");
    check(!out.empty(), "--out is required (the folder for the shards)");
    check(!name.empty() && name.find('/') == std::string::npos, "--name must be a non-empty file name prefix without '/'");
    t.validate();
    ::mkdir(out.c_str(), 0755);
    struct stat st;
    check(::stat(out.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "cannot create output folder " + out);

    const size_t line = size_t(t.line_tokens());
    Rng rng{uint64_t(seed)};
    Split val, train;
    for (Split* s : {&val, &train}) {
      const long long want = s == &val ? val_tokens : train_tokens;
      const size_t lines = std::max<size_t>(1, size_t(want) / line);
      s->classes.names = t.class_names();
      generate_chain_task(t, lines, rng, s->tokens, s->classes.ids);
    }
    std::printf("task        %d assignments in %d chains (%s split), %d queries of 1..%d lookups: %zu tokens per program\n",
                t.assignments, t.chains, t.split.c_str(), t.queries, t.max_hops(), line);
    std::string example;  // a fused assignment (one token above ASCII) shown as "v=x;"
    for (size_t i = 0; i < line; i++) example += chain_token_text(val.tokens[i]);
    std::printf("example     %s", example.c_str());
    write_split(out, name, "val", val);
    write_split(out, name, "train", train);
    std::printf("train with  ./train_cpu --config tiny --vocab 256 --tokenizer bytes --seq %zu --data %s\n",
                line * std::max<size_t>(1, 128 / line), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
