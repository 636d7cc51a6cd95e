// The soft ("pondering") embedding map of PonderLM (methods.md 0.1), as the
// decoders of ponder and adaponder run it (the training passes of ponder and
// adaponder run the same map row-chunked in chunked_readout.h):
//   p = softmax(z)               (N, V)   z = W RMSNorm(h): the pass's logits
//   phi = c * p E                (N, D)   probability-weighted embedding
// backward, given g = dL/dphi (N, D):
//   dE += c * p^T g              (V, D)
//   a   = c * g E^T              (N, V)   = dL/dp
//   dz  = p * (a - <p, a>)       softmax Jacobian
// (dz then goes through the readout backward into W and h.)
// Cost: two V x D products per row, as much as the head itself; counted, and
// beside them the softmax over V (5V + 1 other ops per row, model/flop_count.h).
// The backward runs the softmax again: p is not kept between the forward and
// the backward (an (N, V) buffer per pass, the largest thing a pondering step
// would otherwise hold) but recomputed from the logits, which the readout
// keeps anyway.
#pragma once
#include "model/model.h"

namespace ada {

template <class Bk>
struct SoftEmbedding {
  using T = typename Bk::Real;
  int n = 0;
  T c = 1;
  const T* z = nullptr;  // (n, V) logits: p = softmax(z) is recomputed from them in the backward

  // phi (n, D) from logits z (n, V), which must live until the backward.
  T* forward(Model<Bk>& m, const T* logits, int rows, T scale) {
    const int V = m.cfg.vocab, D = m.cfg.dim;
    n = rows;
    c = scale;
    z = logits;
    T* phi = m.alloc((size_t)n * D);
    {
      auto scratch = m.scratch();  // p: a temporary
      T* p = m.alloc((size_t)n * V);
      m.be.softmax_forward(p, z, n, V);
      m.be.matmul_nn_forward(phi, p, m.w.embed, n, V, D);
    }
    if (c != T(1)) m.be.scale(phi, c, (size_t)n * D);
    m.flops.fwd += 2.0 * n * V * D;
    m.flops.other += op_cost::softmax(n, V) + (c != T(1) ? op_cost::elementwise((double)n * D) : 0.0);
    return phi;
  }

  // dz (n, V) from dphi (n, D); accumulates dE.
  T* backward(Model<Bk>& m, const T* dphi) {
    const int V = m.cfg.vocab, D = m.cfg.dim;
    T* dz = m.alloc((size_t)n * V);  // first dL/dp, then (in place) dL/dz
    auto scratch = m.scratch();      // g and the recomputed p
    T* g = m.alloc((size_t)n * D);   // c * dphi: the scale folds into the product's input
    m.be.copy(g, dphi, (size_t)n * D);
    if (c != T(1)) m.be.scale(g, c, (size_t)n * D);
    T* p = m.alloc((size_t)n * V);
    m.be.softmax_forward(p, z, n, V);  // (its cost is in the backward's 2x of the forward's count)
    m.be.matmul_nn_backward(dz, m.g.embed, g, p, m.w.embed, n, V, D);  // dp = c g E^T, dE += c p^T g
    m.be.softmax_backward(dz, p, dz, n, V);                            // dz = p (dp - <p, dp>), in place
    return dz;
  }
};

}  // namespace ada
