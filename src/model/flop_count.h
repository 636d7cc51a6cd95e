// Compute actually spent, in two counters:
//   fwd    matmul and attention-product FLOPs (a multiply-add = 2): the model
//          FLOPs of MFU accounting (PaLM appendix B, llm.c), what the
//          comparisons of the methods are normally quoted in;
//   other  the elementwise and reduction work those FLOPs hide: softmaxes
//          over V (cross-entropy, PonderLM's soft embedding, TaH's decider),
//          the attention softmax, RMSNorm, RoPE, SwiGLU/SiLU, residual adds,
//          top-k, and the gates', routers' and deciders' pointwise maps.
// Convention for `other`: one op per scalar add, subtract, multiply,
// divide, comparison (a max, a threshold), exp, log or sqrt; a negation is
// free. Every count below is exact for the loops of src/ops/ under this
// rule, except top-k (a heap-selection estimate) and the attention softmax
// (a FlashAttention-style count, see below). Copies, gathers and scatters
// of rows (memory traffic) count 0, as does work on the host (pass plans,
// the halting decisions read back) and the O(passes) per-token loss maps of
// the mixture losses (latent CoT, TaH, CYB), which are training-only and
// negligible beside O(V). The backward is not counted op by op: training
// is 3x forward for both counters (the rule already used for FLOPs).
#pragma once
#include <cmath>

namespace ada {

struct FlopCount {
  double fwd = 0;    // forward matmul + attention FLOPs (multiply-add = 2)
  double other = 0;  // forward non-matmul ops (op_cost below)
  void reset() { fwd = 0, other = 0; }
};

// Ops of one forward call of each non-matmul op, for n rows.
namespace op_cost {

// RMSNorm of n rows of D: D squares and D adds, then / D, + eps, sqrt and a
// reciprocal (4), then x * r * w (2 D).
inline double rmsnorm(double n, int D) { return n * (4.0 * D + 4); }

// RoPE on `cols` columns of each row (q and k: 2 D): per rotated pair
// 4 multiplies and 2 adds, i.e. 3 per column.
inline double rope(double n, int cols) { return n * 3.0 * cols; }

// sigmoid(a) = 1 / (1 + exp(-a)): exp, add, divide.
inline double sigmoid(double count) { return 3.0 * count; }
// silu(a) = a / (1 + exp(-a)): exp, add, divide.
inline double silu(double count) { return 3.0 * count; }
// SwiGLU of n rows of F units: silu(gate) (exp, add, divide), then * gate, * up.
inline double swiglu(double n, int F) { return n * 5.0 * F; }

// Materialised softmax of n rows of V (ops/softmax.h): max (V), subtract
// (V), exp (V), sum (V), one reciprocal, V multiplies.
inline double softmax(double n, int V) { return n * (5.0 * V + 1); }

// Log-softmax read at the target (the cross-entropy, ops/cross_entropy.h):
// max, subtract, exp, sum over V, then log, + max, and z_y - lse.
inline double log_softmax_target(double n, int V) { return n * (4.0 * V + 3); }

// Top-K of n rows of V: a heap of K, about V ceil(log2 K) comparisons (at least V).
inline double topk(double n, int V, int K) { return n * (double)V * std::fmax(1.0, std::ceil(std::log2((double)K))); }

// The attention softmax of one layer, per visible (query, key) pair and head:
// scale, max, subtract, exp, add (5); per query row and head: the log (or
// reciprocal) of the sum and hs normalising multiplies, i.e. H + D per row.
// `keys` = visible (query, key) pairs, from the mask (as for the FLOPs).
inline double attention_softmax(double n, double keys, int H, int D) { return 5.0 * H * keys + n * (H + D); }

// Elementwise add (residuals, e + phi) or scale of `count` values: 1 each.
inline double elementwise(double count) { return count; }

}  // namespace op_cost
}  // namespace ada
