#include "core/config.h"

#include <sstream>

#include "core/common.h"

namespace ada {

void ModelConfig::validate() const {
  auto in_range = [](int v, int hi, const char* what) {
    check(v > 0 && v <= hi, std::string(what) + " must be between 1 and " + std::to_string(hi) + " (got " +
                                std::to_string(v) + ")");
  };
  in_range(vocab, kMaxVocab, "--vocab");
  in_range(dim, kMaxDim, "--dim");
  in_range(layers, kMaxLayers, "--layers");
  in_range(heads, kMaxHeads, "--heads");
  in_range(hidden, kMaxHidden, "--hidden");
  in_range(max_seq, kMaxSeq, "--max-seq");
  check(dim % heads == 0, "--dim (" + std::to_string(dim) + ") must be a multiple of --heads (" +
                              std::to_string(heads) + ")");
  check(head_dim() % 2 == 0, "head size dim/heads must be even for rotary embeddings (got " +
                                 std::to_string(head_dim()) + ")");
  check(rope_theta > 0 && rope_theta < 1e30, "rope theta must be positive and finite");
  check(norm_eps > 0 && norm_eps < 1, "norm eps must be in (0, 1)");
  check(embed_scale >= 0 && embed_scale <= 1e4, "--embed-scale must be in [0, 1e4] (0 = the method's own scale)");
}

long long ModelConfig::num_block_matmul_params() const {
  const long long D = dim, F = hidden;
  // per layer: Wqkv (3D x D), Wo (D x D), Wgate|up (2F x D), Wdown (D x F)
  return (long long)layers * (4 * D * D + 3 * D * F);
}

long long ModelConfig::num_params() const {
  const long long D = dim, V = vocab;
  long long n = V * D;                    // embedding
  n += num_block_matmul_params();         // blocks
  n += (long long)layers * 2 * D + D;     // norm weights
  if (!tied) n += V * D;                  // head
  return n;
}

std::string ModelConfig::describe() const {
  std::ostringstream s;
  s << name << ": V=" << vocab << " D=" << dim << " L=" << layers << " H=" << heads << " F=" << hidden
    << " ctx=" << max_seq << (tied ? " tied" : " untied");
  if (embed_scale > 0) s << " embed-scale=" << embed_scale;
  s << ", " << num_params() << " params";
  return s.str();
}

ModelConfig preset_config(const std::string& name) {
  ModelConfig c;
  c.name = name;
  if (name == "test") {  // the gradient-check model
    c.vocab = 23; c.dim = 16; c.layers = 2; c.heads = 2; c.hidden = 24; c.max_seq = 64;
  } else if (name == "tiny") {  // ~2M parameters, the CPU default
    c.vocab = 4096; c.dim = 128; c.layers = 4; c.heads = 4; c.hidden = 384; c.max_seq = 1024;
  } else if (name == "small") {
    c.vocab = 8192; c.dim = 256; c.layers = 6; c.heads = 8; c.hidden = 688; c.max_seq = 1024;
  } else if (name == "70m") {  // Pythia-70M sized: 6 x 512, 8 heads, V 50304
    // SwiGLU with 3 matrices: F = 1408 ~ (2/3)*4D keeps the MLP at Pythia's 2.1M per layer.
    c.vocab = 50304; c.dim = 512; c.layers = 6; c.heads = 8; c.hidden = 1408; c.max_seq = 2048;
  } else {
    std::string all;
    for (auto& n : preset_names()) all += (all.empty() ? "" : ", ") + n;
    fail("unknown --config '" + name + "' (known: " + all + ")");
  }
  return c;
}

std::vector<std::string> preset_names() { return {"test", "tiny", "small", "70m"}; }

}  // namespace ada
