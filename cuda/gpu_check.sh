#!/usr/bin/env bash
# One run on a machine with an NVIDIA GPU (Hopper or newer): builds train_gpu,
# test_gpu and bench_gpu with nvcc, runs the kernel and whole-step tests on
# the GPU, the benchmark (kernels vs cuBLAS, whole steps of standard and
# adaponder on the 70m shapes), a 50-step `train_gpu --method adaponder`
# smoke run and, with MPI and NCCL installed, the same through train_gpu_nccl
# on one rank. Everything is bounded to fit in 10 minutes, and everything
# docs/benchmarks.md needs (date, GPU, driver, toolkit, figures) is printed.
#
#   cuda/gpu_check.sh                 # from the repository root or anywhere
#   BUILD=/tmp/gpu cuda/gpu_check.sh  # another build folder
#   EIGEN_INC=/path/to/eigen3 ...     # if Eigen is not in /usr/include/eigen3
#
# A stage that fails is reported and the next one still runs; the exit status
# is the number of failed stages.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/gpu_check}
JOBS=${JOBS:-$(nproc)}
MAKE_ARGS=(BUILD="$BUILD" BIN="$BUILD/bin")
[ -n "${EIGEN_INC:-}" ] && MAKE_ARGS+=(EIGEN_INC="$EIGEN_INC")
failed=0
t0=$(date +%s)

stage() {  # stage <name> <timeout seconds> <command...>
  local name=$1 limit=$2
  shift 2
  echo
  echo "== $name (limit ${limit}s, at $(( $(date +%s) - t0 ))s)"
  local s=$(date +%s)
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  echo "-- $name: exit $rc after $(( $(date +%s) - s ))s"
  [ $rc -eq 0 ] || failed=$((failed + 1))
  return $rc
}

echo "== machine"
echo "date (UTC)  $(date -u '+%Y-%m-%d %H:%M')"
changes=$(git status --porcelain 2>/dev/null | grep -q . && echo '(with local changes)')
echo "commit      $(git rev-parse --short HEAD 2>/dev/null || echo '?') $changes"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>/dev/null ||
  echo "nvidia-smi not available"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$NVCC" --version 2>/dev/null | tail -2 || echo "nvcc not found"
echo "cpu         $(nproc) cores"

stage "build train_gpu, test_gpu, bench_gpu" 240 \
  make -j"$JOBS" "${MAKE_ARGS[@]}" NVCC="$NVCC" train_gpu "$BUILD/test_gpu" "$BUILD/bench_gpu"

if [ -x "$BUILD/test_gpu" ]; then
  stage "test_gpu (every kernel vs the CPU, whole steps of every method)" 60 "$BUILD/test_gpu" --gtest_brief=1
fi
if [ -x "$BUILD/bench_gpu" ]; then
  stage "bench_gpu (70m shapes, B=16 T=1024)" 170 "$BUILD/bench_gpu" --reps 5 --steps 3
fi
if [ -x "$BUILD/bin/train_gpu" ]; then
  stage "train_gpu --method adaponder, 50 steps" 110 \
    "$BUILD/bin/train_gpu" --method adaponder --steps 50 --log-every 10 --eval-every 50 --eval-batches 4 \
    --out "$BUILD/runs/adaponder-70m-smoke"
fi
# The data-parallel build (NCCL gradients, MPI start-up) with one rank, when
# MPI and NCCL are installed on this machine (docs/scaling.md).
if command -v mpirun >/dev/null && command -v mpicxx >/dev/null; then
  if stage "build train_gpu_nccl" 120 make -j"$JOBS" "${MAKE_ARGS[@]}" NVCC="$NVCC" train_gpu_nccl; then
    ROOT_FLAG=$([ "$(id -u)" = 0 ] && echo --allow-run-as-root)
    stage "mpirun -np 1 train_gpu_nccl --method adaponder, 20 steps" 90 \
      mpirun $ROOT_FLAG -np 1 "$BUILD/bin/train_gpu_nccl" --method adaponder --steps 20 --log-every 10 \
      --eval-every 20 --eval-batches 2 --out "$BUILD/runs/adaponder-70m-nccl"
  fi
else
  echo "note: no MPI on this machine: train_gpu_nccl is not checked"
fi

echo
echo "== done in $(( $(date +%s) - t0 ))s, $failed failed stage(s)"
exit $failed
