// Learning-rate schedule: linear warmup, then cosine decay to min_frac * lr.
//   step < warmup:  lr * (step + 1) / warmup
//   after:          min + 0.5 (lr - min) (1 + cos(pi * progress)),  progress in [0, 1]
#pragma once
#include <cmath>

namespace ada {

struct CosineSchedule {
  double lr = 1e-3;
  double min_frac = 0.1;
  long long warmup = 0;
  long long total = 1;

  double at(long long step) const {  // step is 0-based
    if (step < warmup) return lr * (double)(step + 1) / (double)warmup;
    const double span = (double)(total - warmup);
    const double progress = span > 0 ? std::fmin(1.0, (double)(step - warmup) / span) : 1.0;
    const double min_lr = lr * min_frac;
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
  }
};

}  // namespace ada
