// Which GPUs a build of the CUDA programs can run on: the decision train_gpu
// and bench_gpu take at start, written as a pure function of the device's
// compute capability and the architectures the build holds, so that the
// tests ask it about any card (no GPU, no CUDA runtime needed).
//
// The build (Makefile: CUDA_ARCHS, CUDA_PTX) holds machine code (SASS) for
// some architectures and PTX for others. A device of compute capability
// major.minor runs
//   * SASS built for sm_XY when X == major and Y <= minor (machine code is
//     compatible within a major version: sm_80 code runs on sm_86 and sm_89);
//   * PTX built for compute_XY when XY <= the device's capability (the driver
//     compiles it at first launch: how Blackwell runs a build made for Hopper).
// What the kernels themselves need: 8.0 (Ampere). The tensor-core GEMMs use
// WMMA with bf16 and tf32 inputs, which exist from sm_80; nothing else in
// cuda/*.cu needs more (docs/cuda.md, "Architectures").
#pragma once
#include <cctype>
#include <string>
#include <vector>

#include "core/common.h"

namespace ada::cuda {

// The least compute capability, times ten, that the kernels need.
constexpr int kMinArch = 80;

// The architectures a build holds, each as 10 major + minor (80 = sm_80).
struct BuildArchs {
  std::vector<int> sass;  // machine code
  std::vector<int> ptx;   // PTX, compiled by the driver for newer devices
};

// "80 86 89 90" -> {80, 86, 89, 90} (how the Makefile passes its lists).
inline std::vector<int> parse_arch_list(const std::string& text) {
  std::vector<int> out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ') {
      i++;
      continue;
    }
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) j++;
    check(j > i && j - i <= 3 && (j == text.size() || text[j] == ' '),
          "architecture list '" + text + "': expected numbers like 80 86 90");
    out.push_back(std::stoi(text.substr(i, j - i)));
    i = j;
  }
  return out;
}

// "sm_80 sm_86 (machine code), compute_90 (PTX)".
inline std::string describe_archs(const BuildArchs& b) {
  std::string s;
  for (int a : b.sass) s += (s.empty() ? "sm_" : " sm_") + std::to_string(a);
  if (!b.sass.empty()) s += " (machine code)";
  std::string p;
  for (int a : b.ptx) p += (p.empty() ? "compute_" : " compute_") + std::to_string(a);
  if (!p.empty()) s += (s.empty() ? "" : ", ") + p + " (PTX)";
  return s.empty() ? "no architectures" : s;
}

// Empty when a device of compute capability major.minor can run this build;
// otherwise what it lacks, as the end of a sentence about the device.
inline std::string gpu_support_problem(int major, int minor, const BuildArchs& built) {
  const int cc = 10 * major + minor;
  const std::string have = std::to_string(major) + "." + std::to_string(minor);
  if (cc < kMinArch)
    return "has compute capability " + have +
           "; the tensor-core GEMMs use WMMA with bf16 and tf32 inputs, which need 8.0 (Ampere) or newer";
  for (int a : built.sass)
    if (a / 10 == major && a % 10 <= minor) return "";
  for (int a : built.ptx)
    if (a <= cc) return "";
  return "has compute capability " + have + ", and this build holds no code it can run (" + describe_archs(built) +
         "); rebuild with the default architectures (make train_gpu, no CUDA_ARCHS), which cover every GPU from 8.0";
}

}  // namespace ada::cuda
