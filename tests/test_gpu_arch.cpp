// Which GPUs the CUDA programs run on: the decision of cuda/gpu_arch.h asked
// about cards this machine does not have, and, when train_gpu is built, the
// architectures its fat binary really holds (cuobjdump, or the fatbin read
// directly) against the ones it claims and the ones the default build must have.
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <set>
#include <string>

#include "gpu_arch.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::cuda;
using namespace ada::test;

namespace {

// What `make train_gpu` builds by default (Makefile: CUDA_ARCHS, CUDA_PTX).
const BuildArchs kDefault{{80, 86, 89, 90}, {90}};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The numbers N of every "<prefix>N" in text ("sm_80 sm_90" -> {80, 90}).
std::set<int> numbers_after(const std::string& text, const std::string& prefix) {
  std::set<int> out;
  const std::regex re(prefix + "([0-9]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.insert(std::stoi((*it)[1].str()));
  return out;
}

// cuobjdump beside nvcc: on the PATH or in /usr/local/cuda/bin; "" if neither.
std::string find_cuobjdump() {
  if (std::system("command -v cuobjdump >/dev/null 2>&1") == 0) return "cuobjdump";
  return exists("/usr/local/cuda/bin/cuobjdump") ? "/usr/local/cuda/bin/cuobjdump" : "";
}

// The architectures of the machine code (ELF) and PTX entries of an
// executable's .nv_fatbin section: what `cuobjdump --list-elf/--list-ptx`
// lists, read directly, so that the test also runs where the toolkit has no
// cuobjdump. The section holds one fatbin container per object file: a
// 16-byte header (u32 magic 0xBA55ED50, u16 version, u16 header size, u64
// size of the entries), then entries, each a header (u16 kind: 1 PTX, 2 ELF;
// u32 header size at byte 4; u64 payload size at byte 8; u32 architecture,
// e.g. 86, at byte 28) and its payload.
struct FatbinArchs {
  bool found = false;  // the executable has a .nv_fatbin section
  std::set<int> elf, ptx;
};

FatbinArchs read_fatbin_archs(const std::string& path) {
  FatbinArchs out;
  const std::string f = read_bytes(path);
  Elf64_Ehdr eh;
  if (f.size() < sizeof eh) return out;
  std::memcpy(&eh, f.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return out;
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, f.data() + eh.e_shoff + i * eh.e_shentsize, sizeof sh);
    return sh;
  };
  if (eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize > f.size() || eh.e_shstrndx >= eh.e_shnum) return out;
  const Elf64_Shdr names = section(eh.e_shstrndx);
  for (size_t i = 0; i < eh.e_shnum; i++) {
    const Elf64_Shdr sh = section(i);
    if (names.sh_offset + sh.sh_name >= f.size() || std::strcmp(f.c_str() + names.sh_offset + sh.sh_name, ".nv_fatbin") != 0)
      continue;
    out.found = true;
    const size_t end = std::min<size_t>(sh.sh_offset + sh.sh_size, f.size());
    auto u16 = [&](size_t at) { uint16_t v; std::memcpy(&v, f.data() + at, 2); return v; };
    auto u32 = [&](size_t at) { uint32_t v; std::memcpy(&v, f.data() + at, 4); return v; };
    auto u64 = [&](size_t at) { uint64_t v; std::memcpy(&v, f.data() + at, 8); return v; };
    size_t at = sh.sh_offset;
    while (at + 16 <= end) {
      if (u32(at) != 0xBA55ED50u) {  // containers are 8-byte aligned
        at += 8;
        continue;
      }
      const size_t entries_end = std::min<size_t>(at + u16(at + 6) + u64(at + 8), end);
      size_t e = at + u16(at + 6);
      while (e + 32 <= entries_end) {
        const int kind = u16(e), arch = (int)u32(e + 28);
        if (kind == 1) out.ptx.insert(arch);
        if (kind == 2) out.elf.insert(arch);
        const uint64_t step = u32(e + 4) + u64(e + 8);
        if (step == 0) break;  // a damaged entry: stop rather than loop
        e += step;
      }
      at = std::max(entries_end, at + 8);
    }
  }
  return out;
}

std::string join(const std::set<int>& s) {
  std::string out;
  for (int a : s) out += (out.empty() ? "" : ",") + std::to_string(a);
  return out;
}

}  // namespace

TEST(GpuArch, BelowAmpereIsRefusedNamingWhatTheCardLacks) {
  const struct {
    int major, minor;
  } old_cards[] = {{7, 5}, {7, 0}, {6, 1}, {5, 2}};  // T4 / RTX 20xx, V100, GTX 10xx, Maxwell
  for (auto c : old_cards) {
    const std::string p = gpu_support_problem(c.major, c.minor, kDefault);
    const std::string cc = std::to_string(c.major) + "." + std::to_string(c.minor);
    EXPECT_TRUE(contains(p, "compute capability " + cc)) << p;
    EXPECT_TRUE(contains(p, "WMMA with bf16 and tf32 inputs")) << p;
    EXPECT_TRUE(contains(p, "need 8.0 (Ampere) or newer")) << p;
    EXPECT_FALSE(contains(p, "\n")) << p;
  }
}

TEST(GpuArch, EveryGpuFromAmpereOnRunsTheDefaultBuild) {
  // A100, A10/RTX 30xx, Jetson Orin, L4/RTX 40xx, H100/H200, B200, RTX 50xx.
  const struct {
    int major, minor;
  } cards[] = {{8, 0}, {8, 6}, {8, 7}, {8, 9}, {9, 0}, {10, 0}, {12, 0}};
  for (auto c : cards)
    EXPECT_EQ(gpu_support_problem(c.major, c.minor, kDefault), "") << c.major << "." << c.minor;
}

// A narrowed build (make train_gpu CUDA_ARCHS=...): machine code runs within
// its major version from its minor up, PTX on every later capability, and a
// card with neither is told what the build holds and how to rebuild.
TEST(GpuArch, MachineCodeRunsWithinItsMajorVersionAndPtxOnLaterOnes) {
  const BuildArchs sm80{{80}, {}};
  EXPECT_EQ(gpu_support_problem(8, 0, sm80), "");
  EXPECT_EQ(gpu_support_problem(8, 6, sm80), "");
  EXPECT_EQ(gpu_support_problem(8, 9, sm80), "");
  const std::string p = gpu_support_problem(9, 0, sm80);
  EXPECT_TRUE(contains(p, "compute capability 9.0")) << p;
  EXPECT_TRUE(contains(p, "holds no code it can run (sm_80 (machine code))")) << p;
  EXPECT_TRUE(contains(p, "make train_gpu")) << p;

  const BuildArchs sm86{{86}, {}};
  EXPECT_NE(gpu_support_problem(8, 0, sm86), "");  // sm_86 code does not run on an 8.0 card
  EXPECT_EQ(gpu_support_problem(8, 9, sm86), "");

  const BuildArchs ptx86{{}, {86}};
  EXPECT_NE(gpu_support_problem(8, 0, ptx86), "");
  EXPECT_EQ(gpu_support_problem(8, 6, ptx86), "");
  EXPECT_EQ(gpu_support_problem(9, 0, ptx86), "");
  EXPECT_EQ(gpu_support_problem(12, 0, ptx86), "");
  // Below 8.0 the kernels themselves are the reason, whatever the build holds.
  EXPECT_TRUE(contains(gpu_support_problem(7, 5, BuildArchs{{75}, {75}}), "need 8.0")) << "7.5";
}

TEST(GpuArch, ArchitectureListsParseAndDescribe) {
  EXPECT_EQ(parse_arch_list("80 86 89 90"), (std::vector<int>{80, 86, 89, 90}));
  EXPECT_EQ(parse_arch_list("  90 "), (std::vector<int>{90}));
  EXPECT_TRUE(parse_arch_list("").empty());
  EXPECT_EQ(describe_archs(kDefault), "sm_80 sm_86 sm_89 sm_90 (machine code), compute_90 (PTX)");
  EXPECT_EQ(describe_archs(BuildArchs{{}, {90}}), "compute_90 (PTX)");
  expect_error([] { parse_arch_list("80,90"); }, {"architecture list '80,90'"});
  expect_error([] { parse_arch_list("sm_80"); }, {"expected numbers like 80 86 90"});
}

// The built train_gpu (ADA_BIN_DIR; .ci/run builds it when nvcc exists)
// holds machine code for sm_80 and sm_90 and PTX for compute_90, and exactly
// the architectures that `train_gpu --help` says it was built for (the lists
// its start-up check decides with). Listed by cuobjdump where the toolkit has
// it, and always by reading the fatbin directly (the two must agree).
TEST(GpuArch, FatBinaryHoldsSm80ToSm90AndWhatItClaims) {
  const std::string train_gpu = program("train_gpu");
  if (train_gpu.empty())
    GTEST_SKIP() << "no train_gpu in ADA_BIN_DIR (make train_gpu needs nvcc): its architectures are not checked";
  const std::string dir = scratch_dir("gpu_arch");
  const FatbinArchs fb = read_fatbin_archs(train_gpu);
  ASSERT_TRUE(fb.found) << train_gpu << " has no .nv_fatbin section";
  std::printf("train_gpu's fatbin: machine code for sm_{%s}, PTX for compute_{%s}\n", join(fb.elf).c_str(),
              join(fb.ptx).c_str());
  const std::string cuobjdump = find_cuobjdump();
  if (cuobjdump.empty()) {
    std::printf("cuobjdump not found (PATH, /usr/local/cuda/bin): the fatbin was read directly only\n");
  } else {
    const ProgramResult elf = run_program(cuobjdump + " --list-elf " + train_gpu, dir);
    ASSERT_EQ(elf.status, 0) << elf.err;
    const ProgramResult ptx = run_program(cuobjdump + " --list-ptx " + train_gpu, dir);
    ASSERT_EQ(ptx.status, 0) << ptx.err;
    EXPECT_EQ(numbers_after(elf.out, "\\.sm_"), fb.elf) << elf.out;
    EXPECT_EQ(numbers_after(ptx.out, "\\.sm_"), fb.ptx) << ptx.out;
  }
  EXPECT_TRUE(fb.elf.count(80)) << join(fb.elf);
  EXPECT_TRUE(fb.elf.count(90)) << join(fb.elf);
  EXPECT_TRUE(fb.ptx.count(90)) << join(fb.ptx);

  const ProgramResult help = run_program(train_gpu + " --help", dir);
  ASSERT_EQ(help.status, 0) << help.err;
  const size_t at = help.out.find("Built for ");
  ASSERT_NE(at, std::string::npos) << help.out;
  const std::string claim = help.out.substr(at, help.out.find('\n', at) - at);
  EXPECT_EQ(numbers_after(claim, "sm_"), fb.elf) << claim;
  EXPECT_EQ(numbers_after(claim, "compute_"), fb.ptx) << claim;
}
