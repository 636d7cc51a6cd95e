// Small shared definitions used everywhere: the host/device function marker,
// the project's error type, and size helpers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

// HD marks a function that is compiled for both the CPU and the GPU. The
// per-token halting arithmetic of every method is written once with it: the CPU
// backend calls it from an OpenMP loop, the CUDA backend from a one-thread-per-
// token kernel (and the host runner of the tests runs that kernel on the CPU).
#if defined(__CUDACC__)
#define HD __host__ __device__
#else
#define HD
#endif

namespace ada {

// Every user-facing failure (bad file, bad flag, NaN loss...) is an ada::Error
// with one line that names the problem. Programs catch it in main(), print
// "error: <message>" and exit with status 1; tests check for it.
struct Error : std::runtime_error {
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

[[noreturn]] inline void fail(const std::string& msg) { throw Error(msg); }

inline void check(bool ok, const std::string& msg) {
  if (!ok) fail(msg);
}

inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace ada
