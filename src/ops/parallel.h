// OpenMP helpers for the CPU ops: parallelise a loop only when it has enough
// work to pay for waking the thread team (tiny double-precision gradient
// checks run thousands of forwards and must not pay that cost).
#pragma once
#include <cstddef>

namespace ada {
constexpr long long kParallelWork = 1 << 15;  // elements of work below which loops stay serial
}

#define ADA_PRAGMA(x) _Pragma(#x)
// Usage: ADA_PARALLEL_FOR(work) for (...) { ... }
#define ADA_PARALLEL_FOR(work) ADA_PRAGMA(omp parallel for schedule(static) if ((long long)(work) > ada::kParallelWork))
