// RaceChecked: a scope in which every kernel launch runs under the host
// runner's shared-memory race check, 4 blocks of each (the first, the last,
// two between). Built by nvcc for a GPU it does nothing.
#pragma once

#if defined(ADA_HOSTRUN)
#include "hostrun/scheduler.h"

struct RaceChecked {
  ada::hostrun::ScopedConfig scoped{[] {
    ada::hostrun::Config c = ada::hostrun::config();
    c.race_check = true;
    c.race_check_blocks = 4;
    return c;
  }()};
};
#else
struct RaceChecked {};
#endif
