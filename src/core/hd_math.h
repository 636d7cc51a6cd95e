// Math for functions compiled for both CPU and GPU (HD): the same names work
// for float and double in host code, in CUDA device code and under the host
// runner of the tests.
#pragma once
#include <cmath>

#include "core/common.h"

namespace ada {

HD inline float hd_exp(float x) { return expf(x); }
HD inline double hd_exp(double x) { return exp(x); }
HD inline float hd_log(float x) { return logf(x); }
HD inline double hd_log(double x) { return log(x); }
template <class T>
HD inline T hd_sigmoid(T x) {
  return T(1) / (T(1) + hd_exp(-x));
}

}  // namespace ada
