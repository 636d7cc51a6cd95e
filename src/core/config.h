// Model configuration: the sizes of the LLaMA-style backbone, presets by name,
// and the parameter / FLOP counts derived from them.
//
// Names used in shape comments throughout the code:
//   B batch, T sequence length, D model width (dim), H heads, hs = D/H head
//   size, F SwiGLU hidden width, V vocabulary (rows of the embedding and head),
//   L layers, N rows of one backbone pass (tokens actually computed).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ada {

// The logits one chunk of the fused classifier computes at a time
// (methods/fused_classifier.h, Model::classifier_rows): 2^25 values, 128 MiB
// in fp32, 667 rows at V = 50304.
inline constexpr size_t kClassifierChunkElems = size_t(1) << 25;

// The largest sizes a model may have: what the flags accept and what a
// checkpoint's metadata may claim (docs/reliability.md). They are far above
// any model this code trains; memory is checked separately, from the sizes
// (train/memory_budget.h), before anything is allocated.
constexpr int kMaxVocab = 1 << 24;    // V: 16.7M tokens (GPT-2 has 50257)
constexpr int kMaxDim = 1 << 16;      // D
constexpr int kMaxLayers = 4096;      // L
constexpr int kMaxHeads = 4096;       // H
constexpr int kMaxHidden = 1 << 18;   // F
constexpr int kMaxSeq = 1 << 20;      // max_seq and --seq: 1M positions

struct ModelConfig {
  std::string name = "tiny";
  int vocab = 4096;         // V
  int dim = 128;            // D
  int layers = 4;           // L
  int heads = 4;            // H
  int hidden = 384;         // F, SwiGLU hidden width
  int max_seq = 1024;       // largest position the model supports (RoPE table)
  bool tied = false;        // output head shares the embedding table
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  // Scale of the token embeddings at the input, x = embed_scale * E[x]. 0 means
  // "the method's own" (1 for standard, K sqrt(D) for ponder, sqrt(2.5 D) for
  // latent_cot, ...: Method::default_embed_scale); a positive value overrides
  // it for every method, so a control can give standard another method's scale.
  double embed_scale = 0;

  int head_dim() const { return dim / heads; }
  // Throws ada::Error naming the first impossible value.
  void validate() const;

  // Parameters of the backbone (embedding, blocks, final norm, head).
  long long num_params() const;
  // Parameters that take part in matmuls per token, per pass (the blocks).
  long long num_block_matmul_params() const;
  std::string describe() const;
};

// Presets: "test" (gradient-check size), "tiny" (~2M params, CPU default),
// "small", "70m" (Pythia-70M-sized). Throws on an unknown name.
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace ada
