// cuda/gpu_check.sh, the one script a lent GPU runs, on this machine: with no
// GPU and no nvcc every stage must be reported as not run, with its reason,
// and the JSON summary must still be written; with a (fake) nvidia-smi the
// machine's GPU, driver and build architecture must be read from it.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>

#include "core/json.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;

namespace {

const char* kScript = "cuda/gpu_check.sh";

// Runs the script with PATH reduced to the system folders plus `extra_path`
// (so no nvidia-smi or nvcc is found unless put there) and NVCC pointing at
// nothing; returns the parsed summary.
Json run_check(const std::string& scratch, const std::string& extra_path, ProgramResult* r) {
  const std::string path = (extra_path.empty() ? "" : extra_path + ":") + "/usr/bin:/bin";
  *r = run_program("PATH=" + path + " NVCC=/nonexistent/nvcc BUILD=" + scratch + "/build OUT=" + scratch +
                       "/out bash " + kScript,
                   scratch);
  return parse_json(read_bytes(scratch + "/out/gpu_check.json"), "gpu_check.json");
}

const Json& stages(const Json& summary) {
  const Json* s = summary.find("stages");
  EXPECT_TRUE(s && s->is(Json::Type::Array));
  return *s;
}

std::string text(const Json& o, const std::string& key) {
  const Json* v = o.find(key);
  return v && v->is(Json::Type::String) ? v->text : "<missing>";
}

}  // namespace

TEST(GpuCheck, WithoutGpuEveryStageSaysWhyItDidNotRun) {
  if (!exists(kScript)) GTEST_SKIP() << kScript << " not found (run the tests from the repository root)";
  const std::string dir = scratch_dir("gpu_check_none");
  ProgramResult r;
  const Json summary = run_check(dir, "", &r);
  EXPECT_EQ(r.status, 0) << r.out << r.err;  // nothing failed: nothing could run
  EXPECT_EQ(text(summary, "no_gpu_reason"), "no NVIDIA driver: nvidia-smi not found");
  const Json& st = stages(summary);
  ASSERT_GE(st.items.size(), 15u);  // build, data, test_gpu, 3 sanitizers, determinism, bench, 9 methods
  std::vector<std::string> names;
  for (const Json& s : st.items) {
    names.push_back(text(s, "name"));
    EXPECT_EQ(text(s, "status"), "not run") << text(s, "name");
    EXPECT_FALSE(text(s, "reason").empty()) << text(s, "name");
  }
  EXPECT_EQ(text(st.items[0], "reason"), "nvcc not found (install the CUDA toolkit or set NVCC=/path/to/nvcc)");
  for (const char* m : {"standard", "looped", "ponder", "pause", "adaponder", "cyb", "latent_cot", "ponderlm2", "tah",
                        "standard_mma", "adaponder_mma", "standard_graph", "cyb_graph",
                        "adaponder_bf16acts"})
    EXPECT_NE(std::find(names.begin(), names.end(), std::string("train_") + m), names.end()) << m;
  EXPECT_NE(r.out.find("== test_gpu: not run: no GPU (no NVIDIA driver: nvidia-smi not found)"), std::string::npos)
      << r.out;
}

TEST(GpuCheck, ReadsTheGpuDriverAndArchitectureFromNvidiaSmi) {
  if (!exists(kScript)) GTEST_SKIP() << kScript << " not found (run the tests from the repository root)";
  const std::string dir = scratch_dir("gpu_check_fake_smi");
  // A stand-in for nvidia-smi on an A100 machine: the query the script makes
  // and the plain table's "CUDA Version".
  const std::string bin = dir + "/fakebin";
  ::mkdir(bin.c_str(), 0755);
  write_bytes(bin + "/nvidia-smi",
              "#!/bin/sh\n"
              "case \"$*\" in\n"
              "  *--query-gpu=name,compute_cap*) echo 'NVIDIA A100-SXM4-80GB, 8.0, 550.54.15, 81920 MiB' ;;\n"
              "  *) echo '| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |' ;;\n"
              "esac\n");
  ::chmod((bin + "/nvidia-smi").c_str(), 0755);
  ProgramResult r;
  const Json summary = run_check(dir, bin, &r);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(text(summary, "gpu"), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(text(summary, "compute_capability"), "8.0");
  EXPECT_EQ(text(summary, "driver"), "550.54.15");
  EXPECT_EQ(text(summary, "driver_cuda"), "12.4");
  EXPECT_EQ(text(summary, "arch"), "sm_80");  // built for the GPU found
  EXPECT_EQ(text(summary, "no_gpu_reason"), "");
  // With a GPU but nothing built, the GPU stages name the missing binary.
  for (const Json& s : stages(summary).items) {
    EXPECT_EQ(text(s, "status"), "not run") << text(s, "name");
    if (text(s, "name") == "test_gpu") {
      EXPECT_NE(text(s, "reason").find("test_gpu was not built"), std::string::npos);
    }
  }
}
