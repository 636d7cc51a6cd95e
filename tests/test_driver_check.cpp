// driver_problem (cuda/driver_check.h): one distinct line for each way a
// first run can fail to reach a GPU, decided without a GPU.
#include <gtest/gtest.h>

#include "driver_check.h"

using ada::cuda::driver_problem;

namespace {
bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }
}  // namespace

TEST(DriverCheck, EachFailureHasItsOwnMessage) {
  const std::string insufficient = "CUDA driver version is insufficient for CUDA runtime version";
  // No driver at all: CUDA itself says "insufficient" here too; we do not.
  const std::string none = driver_problem(0, 13000, cudaErrorInsufficientDriver, 0, insufficient);
  EXPECT_TRUE(has(none, "no NVIDIA driver found")) << none;
  // A 12.4 driver and a 13.0 build: the driver is too old, and which branch is needed.
  const std::string old = driver_problem(12040, 13000, cudaErrorInsufficientDriver, 0, insufficient);
  EXPECT_TRUE(has(old, "supports CUDA 12.4, older than the CUDA 13.0")) << old;
  EXPECT_TRUE(has(old, "branch 580 or newer")) << old;
  EXPECT_TRUE(has(old, "/usr/local/cuda-12.4/bin/nvcc")) << old;
  // Older major version detected from the numbers even without the error code.
  EXPECT_TRUE(has(driver_problem(12080, 13000, cudaSuccess, 1, ""), "older than the CUDA 13.0"));
  // A newer runtime minor on an older driver minor of the same major runs (minor version compatibility).
  EXPECT_EQ(driver_problem(12020, 12080, cudaSuccess, 1, ""), "");
  // A driver but no device.
  const std::string nodev = driver_problem(13000, 13000, cudaErrorNoDevice, 0, "no CUDA-capable device is detected");
  EXPECT_TRUE(has(nodev, "no CUDA device found: the NVIDIA driver (CUDA 13.0) is installed but sees no GPU")) << nodev;
  EXPECT_TRUE(has(driver_problem(13000, 13000, cudaSuccess, 0, ""), "no CUDA device found"));
  // Anything else: CUDA's own words.
  EXPECT_EQ(driver_problem(13000, 13000, cudaErrorUnknown, 0, "unknown error"), "cudaGetDeviceCount failed: unknown error");
  // A usable device.
  EXPECT_EQ(driver_problem(13000, 13000, cudaSuccess, 1, ""), "");
  // The four messages differ.
  EXPECT_NE(none, old);
  EXPECT_NE(old, nodev);
  EXPECT_NE(none, nodev);
}
