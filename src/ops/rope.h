// Rotary position embedding, "rotate-half" convention (GPT-NeoX / HF LLaMA):
// within each head of size hs, element i is paired with element i + hs/2 and
// the pair is rotated by the angle pos * theta^(-2i/hs):
//   forward:  y_i      = x_i cos - x_{i+h} sin
//             y_{i+h}  = x_i sin + x_{i+h} cos            (h = hs/2)
//   backward: the rotation is orthogonal, so the gradient is rotated back:
//             dx_i     =  dy_i cos + dy_{i+h} sin
//             dx_{i+h} = -dy_i sin + dy_{i+h} cos
// Applied in place to `nheads` consecutive heads of each row (q and k are
// adjacent column blocks of qkv, so one call rotates both). Row stride ld.
// cos/sin tables: (max_seq, hs/2), built once by rope_tables().
#pragma once
#include <cmath>
#include <vector>

#include "ops/parallel.h"

namespace ada {

inline void rope_tables(std::vector<double>& cos_t, std::vector<double>& sin_t, int max_seq, int hs,
                        double theta) {
  const int h = hs / 2;
  cos_t.resize((size_t)max_seq * h);
  sin_t.resize((size_t)max_seq * h);
  for (int p = 0; p < max_seq; p++)
    for (int i = 0; i < h; i++) {
      const double freq = std::pow(theta, -2.0 * i / hs);
      cos_t[(size_t)p * h + i] = std::cos(p * freq);
      sin_t[(size_t)p * h + i] = std::sin(p * freq);
    }
}

// sign = +1 forward rotation, -1 inverse (the backward).
template <class T>
void rope_rotate(T* x, int ld, int nheads, const int* pos, int N, int hs, const T* cos_t, const T* sin_t,
                 int sign) {
  const int h = hs / 2;
  ADA_PARALLEL_FOR((long long)N * nheads * hs)
  for (int n = 0; n < N; n++) {
    const T* c = cos_t + (size_t)pos[n] * h;
    const T* s = sin_t + (size_t)pos[n] * h;
    for (int hd = 0; hd < nheads; hd++) {
      T* v = x + (size_t)n * ld + (size_t)hd * hs;
      for (int i = 0; i < h; i++) {
        const T a = v[i], b = v[i + h], sn = sign * s[i];
        v[i] = a * c[i] - b * sn;
        v[i + h] = a * sn + b * c[i];
      }
    }
  }
}

template <class T>
void rope_forward(T* x, int ld, int nheads, const int* pos, int N, int hs, const T* cos_t, const T* sin_t) {
  rope_rotate(x, ld, nheads, pos, N, hs, cos_t, sin_t, +1);
}
template <class T>
void rope_backward(T* dx, int ld, int nheads, const int* pos, int N, int hs, const T* cos_t, const T* sin_t) {
  rope_rotate(dx, ld, nheads, pos, N, hs, cos_t, sin_t, -1);
}

}  // namespace ada
