// generate: sample text from a checkpoint, printing it as it is produced.
//   ./generate --ckpt runs/standard-tiny --prompt "In the beginning"
//   ./generate --ckpt runs/ponder-tiny --prompt "And God said" --temperature 0 --max-tokens 50
// The prompt goes through the method's KV-cached decoder; each new token is
// one decoder step. At the end: tokens/s, the average passes per generated
// token (Decoder::passes_last) and the forward FLOPs per token.
#include <omp.h>

#include <cstdio>

#include "train/cpu_instances.h"
#include "train/checkpoint.h"
#include "train/generation.h"
#include "train/metrics.h"

using namespace ada;

int main(int argc, char** argv) {
  try {
    std::string ckpt, prompt, tokenizer, overrides;
    GenerateOptions g;
    long long seed = 1;
    int threads = 0;
    bool stats = true;
    Flags flags("generate", "Sample text from a checkpoint given a prompt.");
    flags.add("--ckpt", &ckpt, "checkpoint: a run's output directory (its latest) or a ckpt_<step> directory");
    flags.add("--prompt", &prompt, "text to continue (UTF-8); empty: start from end-of-text");
    flags.add("--max-tokens", &g.max_tokens, "tokens to generate", 1, kMaxSeq);
    flags.add("--temperature", &g.temperature, "sampling temperature (0 = greedy)");
    flags.add("--top-k", &g.top_k, "sample among the k most likely tokens (0 = all)", 0, kMaxVocab);
    flags.add("--seed", &seed, "seed of the sampler", 0, LLONG_MAX);
    flags.add("--stop-at-eot", &g.stop_at_eot, "stop when the model produces the end-of-text token");
    flags.add("--tokenizer", &tokenizer, "tokenizer (default: the checkpoint's)");
    flags.add("--stats", &stats, "print tokens/s, passes and FLOPs per token at the end");
    flags.add("--threads", &threads, "CPU threads (0 = all cores / OMP_NUM_THREADS)", 0, kMaxThreads);
    flags.add("--method-overrides", &overrides, "change the method's behaviour, e.g. tau=1e-3 (method flags without --)");
    if (!flags.parse(argc, argv)) return 0;
    check(flags.positional().empty(), "unexpected argument '" + (flags.positional().empty() ? std::string() : flags.positional()[0]) + "' (the prompt goes after --prompt)");
    check(!ckpt.empty(), "--ckpt is required (a run's output directory or a ckpt_<step> directory)");
    if (threads > 0) omp_set_num_threads(threads);
    g.seed = (uint64_t)seed;

    CpuBackend<float> be;
    auto ck = load_checkpoint_model(be, ckpt, overrides);
    auto tok = load_tokenizer(tokenizer.empty() ? ck.meta.tokenizer : tokenizer);
    prompt_tokens(prompt, *tok, g.max_tokens, ck.meta.cfg.max_seq, ck.meta.cfg.vocab);  // bad prompts fail before any output
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
    const GenerateResult r = generate(*ck.model, *ck.method, *tok, prompt, g, [](const std::string& text) {
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    });
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (stats)
      std::printf("[%zu prompt tokens in %.2f s; %zu tokens in %.2f s = %.1f tok/s; %.3f passes/token (method %s); %s forward FLOPs/token]\n",
                   r.prompt.size(), r.prompt_seconds, r.tokens.size(), r.seconds, r.tokens_per_second(),
                   r.mean_passes(), ck.method->name().c_str(), format_count(r.flops_per_token()).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
