// AdamW (decoupled weight decay, Loshchilov & Hutter), one flat loop over a
// range of the parameter buffer. The gradient is first multiplied by
// grad_scale (global-norm clipping factor, computed by the caller).
//   g  = grad_scale * grad
//   m  = b1 m + (1 - b1) g;          v = b2 v + (1 - b2) g^2
//   mh = m / (1 - b1^t);             vh = v / (1 - b2^t)
//   p -= lr * (mh / (sqrt(vh) + eps) + wd * p)
#pragma once
#include <cmath>

#include "ops/parallel.h"

namespace ada {

struct AdamWHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  long long step = 1;  // t, 1-based, for the bias corrections
};

template <class T>
void adamw_update(T* p, const T* grad, T* m, T* v, size_t n, const AdamWHyper& h, double wd, T grad_scale) {
  const T b1 = T(h.beta1), b2 = T(h.beta2);
  const T c1 = T(1.0 / (1.0 - std::pow(h.beta1, (double)h.step)));
  const T c2 = T(1.0 / (1.0 - std::pow(h.beta2, (double)h.step)));
  const T lr = T(h.lr), eps = T(h.eps), dec = T(wd);
  ADA_PARALLEL_FOR(n)
  for (long long i = 0; i < (long long)n; i++) {
    const T g = grad[i] * grad_scale;
    m[i] = b1 * m[i] + (T(1) - b1) * g;
    v[i] = b2 * v[i] + (T(1) - b2) * g * g;
    const T mh = m[i] * c1, vh = v[i] * c2;
    p[i] -= lr * (mh / (std::sqrt(vh) + eps) + dec * p[i]);
  }
}

}  // namespace ada
