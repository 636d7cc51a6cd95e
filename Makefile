# Adaptive per-token computation: CPU (Eigen + OpenMP) and CUDA build.
#
#   make              CPU programs (train_cpu, tokenize, eval, generate, bench_cpu, bench_tokenizer, ...)
#   make test         build and run every GoogleTest suite (no GPU needed)
#   make train_cpu    the CPU trainer
#   make bench        CPU throughput benchmark
#   make sanitize     every test under AddressSanitizer + UBSan (build/san/)
#   make sanitize-ci  the same build, without the long gradient checks (.ci/run)
#   make test-asan    only the CUDA kernel tests (host runner) under the same sanitizers
#   make fuzz         3000 damaged inputs against the programs (make test runs 240)
#   make train_gpu    the CUDA trainer (needs nvcc), for every GPU from sm_80;
#                     CUDA_ARCHS="80" (say) builds machine code for fewer GPUs, faster
#   make train_cpu_mpi   the data-parallel CPU trainer (needs OpenMPI; `make` builds it when mpicxx is found)
#   make train_gpu_nccl  the data-parallel CUDA trainer (needs nvcc, NCCL and MPI)
#
# Layout: library code in src/<area>/*.cpp is compiled once into build/libada.a;
# each src/apps/<name>.cpp becomes the program ./<name>; each tests/*.cpp is a
# GoogleTest file linked into build/run_tests.

CXX      ?= g++
NVCC     ?= nvcc
OPT      ?= -O3 -march=native
CXXFLAGS ?= $(OPT) -g1
# No -I. anywhere: the programs are linked into the repository root, and the
# program ./compare would shadow the standard header <compare> (which <array>
# includes) for every file compiled after it.
CXXFLAGS += -std=c++17 -fopenmp -fno-trapping-math -Wall -Wextra -Wno-unused-parameter -Wno-class-memaccess -Isrc -MMD -MP
EIGEN_INC ?= /usr/include/eigen3
CXXFLAGS += -isystem $(EIGEN_INC) -DEIGEN_NO_DEBUG
LDFLAGS  += -fopenmp
LDLIBS   += -lpthread

BUILD ?= build
BIN   ?= .
# (src/dist/mpi/ is one level deeper: only the MPI programs compile it.)
LIB_SRCS  := $(filter-out src/apps/%,$(wildcard src/*/*.cpp))
LIB_OBJS  := $(patsubst src/%.cpp,$(BUILD)/src/%.o,$(LIB_SRCS))
APP_SRCS  := $(wildcard src/apps/*.cpp)
APP_NAMES := $(patsubst src/apps/%.cpp,%,$(APP_SRCS))
ifeq ($(BIN),.)
APPS := $(APP_NAMES)
else
APPS := $(addprefix $(BIN)/,$(APP_NAMES))
# 'make train_cpu' still works when the programs go to another folder.
.PHONY: $(APP_NAMES)
$(APP_NAMES): %: $(BIN)/%
endif
# TEST_SKIP_SRCS: test files left out of run_tests (sanitize-ci drops those
# whose every test its filter leaves out, to save their sanitized build).
TEST_SKIP_SRCS ?=
TEST_SRCS := $(filter-out $(TEST_SKIP_SRCS),$(wildcard tests/*.cpp))
TEST_OBJS := $(patsubst tests/%.cpp,$(BUILD)/tests/%.o,$(TEST_SRCS))
LIB := $(BUILD)/libada.a
# The data-parallel CPU trainer, when MPI is installed (MPI section below).
MPICXX ?= mpicxx
MPI ?= $(if $(shell command -v $(MPICXX) 2>/dev/null),1,0)
MPI_APPS := $(if $(filter 1,$(MPI)),$(BIN)/train_cpu_mpi)

.PHONY: all test check-deps check-gtest clean bench
all: check-deps $(APPS) $(MPI_APPS)

# One clear message when a build dependency is missing (fresh Debian/Ubuntu machine).
check-deps:
	@test -f $(EIGEN_INC)/Eigen/Dense || { echo "error: Eigen headers not found in $(EIGEN_INC)."; \
	  echo "  install them with:  sudo apt-get install -y libeigen3-dev   (or set EIGEN_INC=/path/to/eigen3)"; exit 1; }

check-gtest:
	@test -f /usr/include/gtest/gtest.h || { echo "error: GoogleTest not found (/usr/include/gtest/gtest.h)."; \
	  echo "  install it with:  sudo apt-get install -y libgtest-dev"; exit 1; }

$(BUILD)/src/%.o: src/%.cpp | check-deps
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(APPS): $(BIN)/%: $(BUILD)/src/apps/%.o $(LIB)
	@mkdir -p $(BIN)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# --- data parallelism over MPI (docs/scaling.md) ------------------------------
# train_cpu_mpi: src/apps/train_cpu.cpp compiled again with -DADA_MPI, plus the
# MPI communicator (src/dist/mpi/), compiled and linked by mpicxx. Built by
# `make` when mpicxx is found; MPI=0 leaves it out, MPI=1 insists.
# (MPICXX, MPI and MPI_APPS are set at the top: `all` needs them.)
MPI_SRCS := $(wildcard src/dist/mpi/*.cpp)
MPI_OBJS := $(patsubst src/%.cpp,$(BUILD)/mpi/%.o,$(MPI_SRCS))
ifneq ($(BIN),.)
.PHONY: train_cpu_mpi
train_cpu_mpi: $(BIN)/train_cpu_mpi
endif

.PHONY: check-mpi
check-mpi:
	@command -v $(MPICXX) >/dev/null || { echo "error: $(MPICXX) not found: the data-parallel programs need MPI."; \
	  echo "  install it with:  sudo apt-get install -y libopenmpi-dev openmpi-bin   (or set MPICXX=/path/to/mpicxx)"; exit 1; }

$(BUILD)/mpi/%.o: src/%.cpp | check-deps check-mpi
	@mkdir -p $(dir $@)
	$(MPICXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/mpi/apps/train_cpu.o: src/apps/train_cpu.cpp | check-deps check-mpi
	@mkdir -p $(dir $@)
	$(MPICXX) $(CXXFLAGS) -DADA_MPI -c $< -o $@

$(BIN)/train_cpu_mpi: $(BUILD)/mpi/apps/train_cpu.o $(MPI_OBJS) $(LIB) | check-mpi
	@mkdir -p $(BIN)
	$(MPICXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)
# --- end of MPI section ----------------------------------------------------------

$(BUILD)/tests/%.o: tests/%.cpp | check-deps check-gtest
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/run_tests: $(TEST_OBJS) $(LIB)
	$(CXX) $(LDFLAGS) $^ -o $@ -lgtest -lgtest_main -lz $(LDLIBS)

# GTEST_ARGS can select suites, e.g. make test GTEST_ARGS=--gtest_filter='GradCheck*'
# The workflow tests run the programs as subprocesses from $(BIN).
# With MPI, the data-parallel tests (tests/test_data_parallel.cpp) run
# train_cpu_mpi under mpirun; without it they are skipped.
test: all $(BUILD)/run_tests
	ADA_BIN_DIR=$(BIN) ADA_TOKENIZE_BIN=$(BIN)/tokenize OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BUILD)/run_tests $(GTEST_ARGS)

bench: bench_cpu
	./bench_cpu

# The whole suite (CPU code, the CUDA kernels under the host runner, and the
# programs the workflow tests start) built with AddressSanitizer and
# UndefinedBehaviorSanitizer, float-to-int overflow included, in build/san/;
# the first report stops the run. Fiber switches are announced to ASan
# (cuda/hostrun/fiber.cpp), so its stack checks hold inside kernels.
# SAN_OPT: -O1, ASan's own advice; against -O2 it builds cpu_instances.cpp
# in 41% less CPU time (the sanitized build is most of CI's time) and the
# sanitize-ci tests run no slower (docs/reliability.md, "Sanitizers").
SAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_OPT ?= -O1
# The input fuzzer (tests/test_fuzz.cpp) at full size: make test runs 240
# cases, this 3000 (ADA_FUZZ_CASES, ADA_FUZZ_SEED to change).
.PHONY: fuzz
fuzz: all $(BUILD)/run_tests
	ADA_FUZZ_CASES=$${ADA_FUZZ_CASES:-3000} ADA_BIN_DIR=$(BIN) ADA_TOKENIZE_BIN=$(BIN)/tokenize OMP_NUM_THREADS=1 \
	  $(BUILD)/run_tests --gtest_filter='Fuzz.*'

# MPI=0: the sanitizer build leaves out train_cpu_mpi (Open MPI's own
# start-up allocations are not this project's to fix), so the data-parallel
# tests skip there. SAN_GTEST_FILTER picks the tests (gtest syntax). Left out by default: one
# float-vs-double budget that the sanitizer build's rounding exceeds without
# any memory or UB error (docs/reliability.md, "Sanitizers"). .ci/run also
# leaves out the long gradient checks and learning tests (SAN_CI_FILTER), and
# the race check's rerun of every kernel test (41 s sanitized; it runs in
# make test); the files whose tests are all left out are not built
# (SAN_CI_SKIP_SRCS), nor the kernel tests of CUDA_TEST_SRCS, which
# make test runs and make test-asan runs under ASan (not in CI: time), except
# the CUDA graph tests (tests/test_step_graph.cpp, a few seconds), whose
# deferred frees and pinned upload buffers are what ASan should watch.
SAN_GTEST_FILTER ?= -Precision.CybWithPauses
SAN_CI_FILTER := -Precision.*:GradCheckModel.*:GradCheckOps.*:*GradCheck*:EmbedScale.OverrideIsUsedAndGradientChecks:Learning.*:Cyb.LearnsToPause*:CudaKernels.SeventyMShapes:StepGraph.SeventyMStepNodeCounts:HostRun.RaceCheckPassesTheKernelTests
SAN_CI_SKIP_SRCS = tests/test_gradcheck_model.cpp tests/test_learning.cpp $(filter-out tests/test_step_graph.cpp,$(CUDA_TEST_SRCS))
.PHONY: sanitize
sanitize:
	$(MAKE) BUILD=$(BUILD)/san BIN=$(BUILD)/san/bin MPI=0 OPT="$(SAN_OPT) -march=native $(SAN_FLAGS)" \
	  LDFLAGS="-fopenmp $(SAN_FLAGS)" GTEST_ARGS="--gtest_filter=$(SAN_GTEST_FILTER)" test
.PHONY: sanitize-ci
sanitize-ci:
	$(MAKE) sanitize SAN_GTEST_FILTER='$(SAN_CI_FILTER)' TEST_SKIP_SRCS='$(SAN_CI_SKIP_SRCS)'

# The CUDA kernels under the host runner with the same sanitizer flags, in the
# same build/san/ (objects shared with `make sanitize`), but only the test
# files that launch kernels, linked into their own binary: no programs, no CPU
# test files. Every cudaMalloc is its own heap block (cuda/hostrun/runtime.cpp),
# so any out-of-bounds global access by a kernel is an ASan report.
# Every file of CUDA_TEST_SRCS (defined below) and the runner's own tests; the
# whole-step tests are parameterised (Methods/CudaStep.*), so the default filter
# is everything the binary holds.
ASAN_TEST_SRCS = tests/test_hostrun.cpp $(CUDA_TEST_SRCS)
ASAN_GTEST_FILTER ?= *
.PHONY: test-asan
test-asan:
	$(MAKE) BUILD=$(BUILD)/san MPI=0 OPT="$(SAN_OPT) -march=native $(SAN_FLAGS)" \
	  LDFLAGS="-fopenmp $(SAN_FLAGS)" $(BUILD)/san/kernel_tests
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BUILD)/san/kernel_tests --gtest_filter='$(ASAN_GTEST_FILTER)'

clean:
	rm -rf $(BUILD) $(APPS) train_gpu train_cpu_mpi train_gpu_nccl

# --- CUDA host runner (cuda/hostrun/) -----------------------------------------
# The runner executes CUDA kernels on the CPU so that the tests can check them
# on machines without a GPU (docs/hostrun.md). Its sources are compiled into
# the test binary only, never into the programs; tests see the kernel headers
# (compat.h, launch.h) through -Icuda. `make cuda-check` compiles cuda/smoke.cu
# with nvcc for CUDA_ARCHS and CUDA_PTX: proof that those headers are valid CUDA.
HOSTRUN_SRCS := $(wildcard cuda/hostrun/*.cpp)
HOSTRUN_OBJS := $(patsubst cuda/%.cpp,$(BUILD)/cuda/%.o,$(HOSTRUN_SRCS))
NVCCFLAGS  ?= -O2
# The GPU architectures nvcc builds for (docs/cuda.md, "Architectures"):
# machine code (SASS) for each of CUDA_ARCHS, and PTX for CUDA_PTX, which the
# driver compiles for newer GPUs at first launch. sm_80 code also runs on
# sm_86/sm_89, so `make train_gpu CUDA_ARCHS=80` (or the one your GPU has)
# builds faster and still runs there. The kernels need 8.0 (bf16/tf32 WMMA).
CUDA_ARCHS ?= 80 86 89 90
CUDA_PTX   ?= 90
CUDA_ARCH_FLAGS := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
                   $(foreach a,$(CUDA_PTX),-gencode arch=compute_$(a),code=compute_$(a))

$(BUILD)/tests/%.o: CXXFLAGS += -Icuda

$(BUILD)/cuda/%.o: cuda/%.cpp | check-deps
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -Icuda -c $< -o $@

$(BUILD)/run_tests: $(HOSTRUN_OBJS)

.PHONY: cuda-check
cuda-check: $(BUILD)/cuda/smoke.o

$(BUILD)/cuda/smoke.o: cuda/smoke.cu cuda/compat.h cuda/launch.h src/core/common.h
	@command -v $(NVCC) >/dev/null || { echo "error: $(NVCC) not found (set NVCC=/path/to/nvcc)"; exit 1; }
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 $(NVCCFLAGS) $(CUDA_ARCH_FLAGS) -Xcompiler -Wall,-Wextra -Isrc -Icuda -c $< -o $@
# --- end of CUDA host runner section -------------------------------------------

# --- CUDA backend, train_gpu, test_gpu, bench_gpu (cuda/*.cu) ------------------
# The kernel files cuda/<family>.cu and the backend cuda/cuda_backend.cu are
# compiled twice (docs/cuda.md):
#   * by the host compiler (-x c++, the host runner's headers via -Icuda) into
#     $(BUILD)/cuda_host/, linked into $(BUILD)/run_tests: `make test` runs every
#     kernel against the CPU backend on machines without a GPU;
#   * by nvcc for CUDA_ARCHS (SASS) and CUDA_PTX (PTX for newer GPUs) into
#     $(BUILD)/cuda_nv/, for the GPU programs. These are built only when asked:
#       make train_gpu    the CUDA trainer (same flags as train_cpu, default --config 70m)
#       make test_gpu     build the kernel and whole-step tests with nvcc and run them on the GPU
#       make bench_gpu    build and run the GPU benchmark (kernels vs cuBLAS, whole steps)
# `make` and `make test` never need nvcc.
ifeq ($(shell command -v $(NVCC) 2>/dev/null),)
ifneq ($(wildcard /usr/local/cuda/bin/nvcc),)
NVCC := /usr/local/cuda/bin/nvcc
endif
endif
CUDA_PROGRAMS    := cuda/train_gpu.cu cuda/bench_gpu.cu
CUDA_KERNEL_SRCS := $(filter-out cuda/smoke.cu cuda/nccl_communicator.cu $(CUDA_PROGRAMS),$(wildcard cuda/*.cu))
CUDA_HOST_OBJS   := $(patsubst cuda/%.cu,$(BUILD)/cuda_host/%.o,$(CUDA_KERNEL_SRCS))
CUDA_NV_OBJS     := $(patsubst cuda/%.cu,$(BUILD)/cuda_nv/%.o,$(CUDA_KERNEL_SRCS))
CUDA_TEST_SRCS   := tests/test_cuda_kernels.cpp tests/test_cuda_step.cpp tests/test_warp_mma.cpp tests/test_gemm_mma.cpp \
                    tests/test_attention_mma.cpp tests/test_step_graph.cpp
CUDA_TEST_OBJS   := $(patsubst tests/%.cpp,$(BUILD)/cuda_nv/tests/%.o,$(CUDA_TEST_SRCS))
NVCC_OPT         ?= -O3
NVCC_HOST_WARN   := -Wall,-Wextra,-Wno-unused-parameter,-Wno-class-memaccess
# The programs learn the lists (cuda/open_gpu.h) to check the GPU at start.
NVCC_ALL_FLAGS    = -std=c++17 $(NVCC_OPT) $(CUDA_ARCH_FLAGS) -Xcompiler -fopenmp,$(NVCC_HOST_WARN) \
                    -Isrc -Icuda -isystem $(EIGEN_INC) -DEIGEN_NO_DEBUG -MMD -MP \
                    -DADA_CUDA_ARCHS='"$(CUDA_ARCHS)"' -DADA_CUDA_PTX='"$(CUDA_PTX)"'
NVCC_LDFLAGS      = $(CUDA_ARCH_FLAGS) -Xcompiler -fopenmp
# Every nvcc object depends on this file, which holds the architecture lists
# and is rewritten only when they change: a build with other CUDA_ARCHS
# recompiles everything instead of linking objects made for other GPUs.
CUDA_ARCH_STAMP  := $(BUILD)/cuda_nv/archs
CUDA_ARCH_LINE   := CUDA_ARCHS=$(CUDA_ARCHS) CUDA_PTX=$(CUDA_PTX)
.PHONY: FORCE
$(CUDA_ARCH_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CUDA_ARCH_LINE)' | cmp -s - $@ || echo '$(CUDA_ARCH_LINE)' > $@

ifeq ($(BIN),.)
TRAIN_GPU := train_gpu
else
TRAIN_GPU := $(BIN)/train_gpu
.PHONY: train_gpu
train_gpu: $(TRAIN_GPU)
endif

# Under the runner: kernels are ordinary C++ for the test binary.
$(BUILD)/cuda_host/%.o: cuda/%.cu | check-deps
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -Icuda -x c++ -c $< -o $@

$(BUILD)/run_tests: $(CUDA_HOST_OBJS)

# The kernel tests alone (make test-asan builds this in build/san/).
$(BUILD)/kernel_tests: $(patsubst tests/%.cpp,$(BUILD)/tests/%.o,$(ASAN_TEST_SRCS)) $(HOSTRUN_OBJS) $(CUDA_HOST_OBJS) $(LIB)
	$(CXX) $(LDFLAGS) $^ -o $@ -lgtest -lgtest_main -lz $(LDLIBS)

.PHONY: check-nvcc test_gpu bench_gpu ptxas-gemm-mma ptxas-attention-mma
# ptxas's registers, spills and shared memory of the tensor-core GEMMs
# (cuda/gemm_mma.cu) for sm_90, kept in $(BUILD)/ptxas_gemm_mma.txt; fails on
# any spill or on more than 128 registers (two blocks per SM, issue 13).
ptxas-gemm-mma: | check-nvcc
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 $(NVCC_OPT) -gencode arch=compute_90,code=sm_90 -Xptxas -v -Isrc -Icuda -isystem $(EIGEN_INC) \
	  -c cuda/gemm_mma.cu -o $(BUILD)/ptxas_gemm_mma.o 2>&1 | c++filt > $(BUILD)/ptxas_gemm_mma.txt
	@grep -E "Compiling entry|registers|spill" $(BUILD)/ptxas_gemm_mma.txt | sed -e 's/^ptxas info *: //'
	@awk '/Compiling entry/ {k = $$0} \
	  /spill stores/ && ($$5 + 0 > 0 || $$9 + 0 > 0) {print "error: spills in " k; bad = 1} \
	  /Used [0-9]+ registers/ {for (i = 1; i < NF; i++) if ($$i == "Used" && $$(i + 1) + 0 > 128) {print "error: over 128 registers in " k; bad = 1}} \
	  END {exit bad}' $(BUILD)/ptxas_gemm_mma.txt
# The same for the tensor-core attention (cuda/attention_mma.cu), one kernel
# per head size, kept in $(BUILD)/ptxas_attention_mma.txt; fails on any spill
# (no register cap: one block of 4 warps, up to 255 registers a thread).
ptxas-attention-mma: | check-nvcc
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 $(NVCC_OPT) -gencode arch=compute_90,code=sm_90 -Xptxas -v -Isrc -Icuda -isystem $(EIGEN_INC) \
	  -c cuda/attention_mma.cu -o $(BUILD)/ptxas_attention_mma.o 2>&1 | c++filt > $(BUILD)/ptxas_attention_mma.txt
	@grep -E "Compiling entry|registers|spill" $(BUILD)/ptxas_attention_mma.txt | sed -e 's/^ptxas info *: //' \
	  -e 's/(float\*.*)//' -e 's/ada::cuda::(anonymous namespace):://'
	@awk '/Compiling entry/ {k = $$0} \
	  /spill stores/ && ($$5 + 0 > 0 || $$9 + 0 > 0) {print "error: spills in " k; bad = 1} \
	  END {exit bad}' $(BUILD)/ptxas_attention_mma.txt
check-nvcc:
	@command -v $(NVCC) >/dev/null || { echo "error: nvcc not found (looked for '$(NVCC)' and /usr/local/cuda/bin/nvcc); install the CUDA toolkit or set NVCC=/path/to/nvcc"; exit 1; }

$(BUILD)/cuda_nv/%.o: cuda/%.cu $(CUDA_ARCH_STAMP) | check-nvcc check-deps
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_ALL_FLAGS) -c $< -o $@

# The tests also include the CPU backend (Eigen): 20012 and 20015 come from
# Eigen's __host__ __device__ annotations (defaulted members, constexpr calls),
# 177 is a variable that only an OpenMP clause uses.
$(BUILD)/cuda_nv/tests/%.o: tests/%.cpp $(CUDA_ARCH_STAMP) | check-nvcc check-deps check-gtest
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_ALL_FLAGS) -diag-suppress 20012,20015,177 -x cu -c $< -o $@

$(TRAIN_GPU): $(BUILD)/cuda_nv/train_gpu.o $(CUDA_NV_OBJS) $(LIB) | check-nvcc
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/test_gpu: $(CUDA_TEST_OBJS) $(CUDA_NV_OBJS) $(LIB) | check-nvcc
	$(NVCC) $(NVCC_LDFLAGS) $^ -o $@ -lgtest -lgtest_main $(LDLIBS)

$(BUILD)/bench_gpu: $(BUILD)/cuda_nv/bench_gpu.o $(CUDA_NV_OBJS) $(LIB) | check-nvcc
	$(NVCC) $(NVCC_LDFLAGS) $^ -o $@ -lcublas $(LDLIBS)

# train_gpu_nccl: train_gpu.cu again with -DADA_NCCL, the NCCL communicator
# and the MPI one; nvcc hands the host compilation and the link to mpicxx
# (-ccbin), which adds MPI's flags. NCCL's header and library are looked for
# under the CUDA toolkit and the system folders (NCCL_INC, NCCL_LIB to point
# elsewhere). Built only when asked; .ci/run builds it when all three exist.
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v $(NVCC) 2>/dev/null)))
NCCL_INC  ?= $(patsubst %/nccl.h,%,$(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h)))
NCCL_LIB  ?= $(patsubst %/libnccl.so,%,$(firstword $(wildcard $(CUDA_HOME)/lib/libnccl.so $(CUDA_HOME)/lib64/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so /usr/local/lib/libnccl.so)))
ifeq ($(BIN),.)
TRAIN_GPU_NCCL := train_gpu_nccl
else
TRAIN_GPU_NCCL := $(BIN)/train_gpu_nccl
.PHONY: train_gpu_nccl
train_gpu_nccl: $(TRAIN_GPU_NCCL)
endif
.PHONY: check-nccl
check-nccl: check-nvcc check-mpi
	@test -n "$(NCCL_INC)" -a -n "$(NCCL_LIB)" || { echo "error: NCCL not found (nccl.h and libnccl.so under $(CUDA_HOME) or /usr); set NCCL_INC and NCCL_LIB"; exit 1; }

$(BUILD)/cuda_nccl/train_gpu.o: cuda/train_gpu.cu $(CUDA_ARCH_STAMP) | check-nccl check-deps
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_ALL_FLAGS) -ccbin $(MPICXX) -I$(NCCL_INC) -DADA_NCCL -c $< -o $@

$(BUILD)/cuda_nccl/nccl_communicator.o: cuda/nccl_communicator.cu $(CUDA_ARCH_STAMP) | check-nccl check-deps
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_ALL_FLAGS) -I$(NCCL_INC) -c $< -o $@

$(TRAIN_GPU_NCCL): $(BUILD)/cuda_nccl/train_gpu.o $(BUILD)/cuda_nccl/nccl_communicator.o $(MPI_OBJS) $(CUDA_NV_OBJS) $(LIB) | check-nccl
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_LDFLAGS) -ccbin $(MPICXX) $^ -o $@ -L$(NCCL_LIB) -lnccl -Xlinker -rpath,$(NCCL_LIB) $(LDLIBS)

# GTEST_ARGS / BENCH_ARGS pass options through, as for `make test`.
test_gpu: $(BUILD)/test_gpu
	$(BUILD)/test_gpu $(GTEST_ARGS)

bench_gpu: $(BUILD)/bench_gpu
	$(BUILD)/bench_gpu $(BENCH_ARGS)
# --- end of CUDA backend section --------------------------------------------------

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
