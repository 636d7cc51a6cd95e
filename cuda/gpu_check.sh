#!/usr/bin/env bash
# The one script a lent GPU runs: it builds with the machine's own nvcc, for
# the machine's own GPU, and reports everything docs/benchmarks.md and
# docs/cuda.md need from a first run, in one go:
#
#   machine      date, commit, GPU, compute capability, driver, the CUDA
#                version the driver supports, nvcc, CPU
#   build        train_gpu, test_gpu, bench_gpu
#   test_gpu     every kernel against its CPU twin, whole steps of every method
#   sanitizer    compute-sanitizer memcheck, racecheck and synccheck on a
#                subset of test_gpu (skipped when compute-sanitizer is absent)
#   determinism  two identical 20-step train_gpu runs, without and with
#                --deterministic (which must agree): is the checkpoint the
#                same bit for bit? (a measurement: atomics may make it differ)
#   bench_gpu    kernels against cuBLAS, whole steps on the 70m shapes (MFU);
#                fails when a GEMM's output disagrees with cuBLAS's (FAIL lines)
#   train_<m>    30 steps of train_gpu --method <m> at the 70m config (16 x 128), for
#                every method: first and last loss, tokens/s, peak memory;
#                standard_mma, adaponder_mma: the same on the opt-in
#                tensor-core GEMM and attention (ADA_GEMM=bf16mma ADA_ATTN=mma)
#   *_nccl       the data-parallel build (train_gpu_nccl) and 20 steps of it
#                on one rank under mpirun, when MPI is installed
#
# Every stage has its own time limit, is timed, and is reported as passed,
# failed (exit status and the log's last lines) or not run (and why); a
# failed stage never hides the ones after it. The whole run stays under
# about 8 minutes on a 16-core machine with one H200. At the end one JSON
# summary is written to $OUT/gpu_check.json (or $BUILD/gpu_check.json), with
# every stage's log beside it in logs/.
#
#   cuda/gpu_check.sh                 # from the repository root or anywhere
#   BUILD=/tmp/gpu cuda/gpu_check.sh  # another build folder
#   EIGEN_INC=/path/to/eigen3 ...     # if Eigen is not in /usr/include/eigen3
#   ARCH=sm_80 ...                    # build for another GPU than the one found
#
# Without a GPU (or without nvcc) every stage that needs one reports "not
# run" with the reason, and the summary is still written. The exit status is
# the number of failed stages.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/gpu_check}
JOBS=${JOBS:-$(nproc)}
RESULTS=${OUT:-$BUILD}
LOGS="$RESULTS/logs"
mkdir -p "$LOGS"
export BUILD LOGS  # for the stages written as shell functions
SUMMARY="$RESULTS/gpu_check.json"
STAGES_JSON=""   # the stages' JSON objects, comma-separated
failed=0
t0=$(date +%s)

json_str() {  # a JSON string literal of $1
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/ }
  s=${s//$'\r'/}
  s=${s//$'\n'/\\n}
  printf '"%s"' "$s"
}

add_stage_json() {  # name status rc seconds reason extra_json_fields
  local obj="{\"name\": $(json_str "$1"), \"status\": $(json_str "$2"), \"exit\": $3, \"seconds\": $4, \"reason\": $(json_str "$5")${6:+, $6}}"
  STAGES_JSON="${STAGES_JSON:+$STAGES_JSON, }$obj"
}

not_run() {  # not_run <name> <reason>
  echo
  echo "== $1: not run: $2"
  add_stage_json "$1" "not run" "null" 0 "$2" ""
}

# stage <name> <limit seconds> <command...>: runs the command with a time
# limit, its output shown and kept in $LOGS/<name>.log. STAGE_RC is set.
STAGE_RC=0
STAGE_EXTRA=""  # extra JSON fields a caller sets before calling stage
stage() {
  local name=$1 limit=$2
  shift 2
  local log="$LOGS/$name.log"
  echo
  echo "== $name (limit ${limit}s, at $(( $(date +%s) - t0 ))s)"
  local s
  s=$(date +%s)
  if [ "$(type -t "$1")" = function ]; then  # timeout runs programs: give it the function's text
    timeout --kill-after=10 "$limit" bash -c "$(declare -f "$1" peak_mib); $1 \"\$@\"" _ "${@:2}" 2>&1 | tee "$log"
  else
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$log"
  fi
  STAGE_RC=${PIPESTATUS[0]}
  local took=$(( $(date +%s) - s ))
  local status=passed reason=""
  if [ "$STAGE_RC" -ne 0 ]; then
    status=failed
    failed=$((failed + 1))
    if [ "$STAGE_RC" -eq 124 ] || [ "$STAGE_RC" -eq 137 ]; then
      reason="time limit of ${limit}s reached"
    else
      reason="exit $STAGE_RC: $(grep -v '^\s*$' "$log" | tail -n 3 | cut -c1-300)"
    fi
  fi
  echo "-- $name: $status (exit $STAGE_RC) after ${took}s"
  add_stage_json "$name" "$status" "$STAGE_RC" "$took" "$reason" "$STAGE_EXTRA"
  STAGE_EXTRA=""
  return "$STAGE_RC"
}

# ---- the machine ------------------------------------------------------------
echo "== machine"
DATE=$(date -u '+%Y-%m-%d %H:%M')
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git status --porcelain 2>/dev/null | grep -q . && echo ' (with local changes)')"
CPU=$(lscpu 2>/dev/null | sed -n 's/^Model name:\s*//p' | head -n 1)
echo "date (UTC)   $DATE"
echo "commit       $COMMIT"
echo "cpu          ${CPU:-?}, $(nproc) cores"

GPU_REASON=""  # why no GPU stage can run; empty when a GPU is usable
GPU_NAME="" GPU_CC="" DRIVER="" DRIVER_CUDA="" GPU_MEM=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
  GPU_REASON="no NVIDIA driver: nvidia-smi not found"
elif ! smi=$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1); then
  GPU_REASON="nvidia-smi failed: $(echo "$smi" | head -n 1)"
elif [ -z "$smi" ]; then
  GPU_REASON="nvidia-smi lists no GPU"
else
  IFS=, read -r GPU_NAME GPU_CC DRIVER GPU_MEM <<<"$(echo "$smi" | head -n 1)"
  GPU_NAME=$(echo "$GPU_NAME" | xargs) GPU_CC=$(echo "$GPU_CC" | xargs)
  DRIVER=$(echo "$DRIVER" | xargs) GPU_MEM=$(echo "$GPU_MEM" | xargs)
  DRIVER_CUDA=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
  echo "gpu          $GPU_NAME, compute capability $GPU_CC, $GPU_MEM ($(echo "$smi" | wc -l) GPU(s); the first is used)"
  echo "driver       $DRIVER (supports CUDA ${DRIVER_CUDA:-?})"
fi
[ -n "$GPU_REASON" ] && echo "gpu          none: $GPU_REASON"

NVCC=${NVCC:-$(command -v nvcc || true)}
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -n "$NVCC" ] && ! command -v "$NVCC" >/dev/null 2>&1; then
  echo "nvcc         '$NVCC' is not an executable"
  NVCC=""
fi
NVCC_VERSION=""
if [ -n "$NVCC" ]; then
  NVCC_VERSION=$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  echo "nvcc         $NVCC (CUDA ${NVCC_VERSION:-?})"
  # A toolkit newer than the driver builds binaries that cannot start.
  if [ -n "$DRIVER_CUDA" ] && [ -n "$NVCC_VERSION" ] &&
     [ "$(printf '%s\n%s\n' "$DRIVER_CUDA" "$NVCC_VERSION" | sort -V | head -n 1)" != "$NVCC_VERSION" ]; then
    echo "warning      nvcc $NVCC_VERSION is newer than the driver's CUDA $DRIVER_CUDA: expect 'CUDA driver version is insufficient'"
  fi
else
  echo "nvcc         not found"
fi

# Build for this GPU only (quicker than every architecture), plus its PTX.
if [ -z "${ARCH:-}" ] && [ -n "$GPU_CC" ]; then ARCH="sm_${GPU_CC/./}"; fi
ARCH=${ARCH:-sm_90}
echo "build for    $ARCH (machine code and PTX)"
MAKE_ARGS=(BUILD="$BUILD" BIN="$BUILD/bin" CUDA_ARCHS="${ARCH#sm_}" CUDA_PTX="${ARCH#sm_}")
[ -n "${EIGEN_INC:-}" ] && MAKE_ARGS+=(EIGEN_INC="$EIGEN_INC")

# ---- build ------------------------------------------------------------------
if [ -z "$NVCC" ]; then
  not_run build "nvcc not found (install the CUDA toolkit or set NVCC=/path/to/nvcc)"
else
  stage build 300 make -j"$JOBS" "${MAKE_ARGS[@]}" NVCC="$NVCC" "$BUILD/bin/train_gpu" "$BUILD/test_gpu" \
    "$BUILD/bench_gpu" "$BUILD/bin/tokenize"
fi
# The training stages' data: the shipped corpus in GPT-2 tokens (the 70m
# config's vocabulary), tokenized once instead of at every run.
DATA="$BUILD/data"
export DATA
# The training stages are short checks: 16 x 128 tokens per step, not
# train_gpu's default of 16 x 1024 (bench_gpu measures the 70m shapes).
export SEQ=128  # (the stages run their functions in a new bash)
if [ ! -x "$BUILD/bin/tokenize" ]; then not_run data "$BUILD/bin/tokenize was not built (see the build stage)"
else stage data 60 "$BUILD/bin/tokenize" --tokenizer gpt2 --out-dir "$DATA" data/kjv.txt
fi

# need <binary>: prints why a GPU stage cannot run, or nothing.
need() {
  if [ -n "$GPU_REASON" ]; then echo "no GPU ($GPU_REASON)"
  elif [ ! -x "$1" ]; then echo "$1 was not built (see the build stage)"
  elif [ -n "${2:-}" ] && [ ! -d "$DATA" ]; then echo "no data (see the data stage)"
  fi
}

# ---- tests ------------------------------------------------------------------
why=$(need "$BUILD/test_gpu")
if [ -n "$why" ]; then not_run test_gpu "$why"
else stage test_gpu 90 "$BUILD/test_gpu" --gtest_brief=1
fi

SAN=$(command -v compute-sanitizer || true)
[ -z "$SAN" ] && [ -n "$NVCC" ] && [ -x "$(dirname "$NVCC")/compute-sanitizer" ] && SAN="$(dirname "$NVCC")/compute-sanitizer"
# A subset that launches every kind of kernel once or twice: the sanitizers
# slow kernels down by 10-100x.
SAN_FILTER='CudaKernels.RMSNorm:CudaKernels.AttentionCausal:CudaKernels.AttentionDuoCausal:CudaKernels.CrossEntropy:CudaKernels.Rows:CudaKernels.TopKValues:CudaKernels.AdamWWithDeviceClipping:CudaGemm*SplitK*'
for tool in memcheck racecheck synccheck; do
  why=$(need "$BUILD/test_gpu")
  [ -z "$why" ] && [ -z "$SAN" ] && why="compute-sanitizer not found"
  if [ -n "$why" ]; then not_run "sanitizer_$tool" "$why"
  else stage "sanitizer_$tool" 60 "$SAN" --tool "$tool" --error-exitcode 1 "$BUILD/test_gpu" --gtest_brief=1 --gtest_filter="$SAN_FILTER"
  fi
done

# ---- determinism: the same run twice --------------------------------------
why=$(need "$BUILD/bin/train_gpu" data)
if [ -n "$why" ]; then not_run determinism "$why"
else
  det() {  # two runs per mode, then compare their final checkpoints byte for byte
    local mode flag fa fb res="" rc=0
    for mode in default deterministic; do
      flag=""; [ "$mode" = deterministic ] && flag=--deterministic
      rm -rf "$BUILD/runs/det_a" "$BUILD/runs/det_b"
      for r in a b; do
        "$BUILD/bin/train_gpu" --method adaponder --steps 20 --seq "$SEQ" --log-every 10 --eval-every 0 --eval-batches 1 $flag \
          --data "$DATA" --out "$BUILD/runs/det_$r" || return 2
      done
      fa=$(find "$BUILD/runs/det_a" -name model.safetensors | sort | tail -n 1)
      fb=$(find "$BUILD/runs/det_b" -name model.safetensors | sort | tail -n 1)
      [ -n "$fa" ] && [ -n "$fb" ] || { echo "no checkpoint written"; return 2; }
      if cmp -s "$fa" "$fb"; then echo "determinism ($mode): the two runs' checkpoints are identical"; res="$res$mode identical, "
      elif [ "$mode" = default ]; then echo "determinism (default): the two runs' checkpoints differ (float atomics in the embedding and gate-bias backward)"; res="$res$mode differs, "
      else echo "determinism (--deterministic): the two runs' checkpoints DIFFER: a bug"; res="$res$mode differs, "; rc=1
      fi
    done
    echo "${res%, }" > "$LOGS/determinism.result"
    return $rc
  }
  stage determinism 120 det
  res=$(cat "$LOGS/determinism.result" 2>/dev/null || echo unknown)
  STAGES_JSON="${STAGES_JSON%\}}, \"result\": $(json_str "$res")}"
fi

# ---- benchmark --------------------------------------------------------------
why=$(need "$BUILD/bench_gpu")
if [ -n "$why" ]; then not_run bench_gpu "$why"
else stage bench_gpu 150 "$BUILD/bench_gpu" --reps 5 --steps 3 --methods standard,standard+graph,adaponder,adaponder+bf16acts
fi

# ---- every method at the 70m config -----------------------------------------
# peak_mib <pid>: the largest memory.used nvidia-smi reports while pid runs.
peak_mib() {
  local pid=$1 peak=0 m
  while kill -0 "$pid" 2>/dev/null; do
    m=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n 1 | tr -dc 0-9)
    [ -n "$m" ] && [ "$m" -gt "$peak" ] && peak=$m
    sleep 0.5
  done
  echo "$peak"
}
train_one() {  # train_one <method> [<run name> [VAR=value ...]]: 30 steps with those environment variables
  local m=$1 name=${2:-$1}
  # shellcheck disable=SC2086  # TRAIN_FLAGS: extra flags, word-split on purpose
  env "${@:3}" "$BUILD/bin/train_gpu" --method "$m" --steps 30 --seq "$SEQ" --log-every 10 --eval-every 0 --eval-batches 2 \
    ${TRAIN_FLAGS:-} --data "$DATA" --out "$BUILD/runs/$name-70m" &
  local pid=$!
  local peak
  peak=$(peak_mib "$pid")
  wait "$pid"
  local rc=$?
  echo "peak GPU memory used (nvidia-smi): $peak MiB"
  return $rc
}
# Every method on the default paths, then standard and adaponder again on the
# opt-in tensor-core paths (<method>_mma: ADA_GEMM=bf16mma, the pipelined
# mma.sync GEMM, and ADA_ATTN=mma, the tensor-core attention): their loss and
# tok/s beside the default runs' are the first end-to-end measure of both.
# standard_graph and cyb_graph: --cuda-graph 1 (each micro-batch's forward and
# backward launched as one CUDA graph, cuda/step_graph.h), against the
# standard and cyb runs before them. adaponder_bf16acts: --bf16-acts 1 (the
# blocks' saved q, attention output and gate|up in bf16), its loss and peak
# memory against the adaponder run's.
for r in standard looped ponder pause adaponder cyb latent_cot ponderlm2 tah standard_mma adaponder_mma \
  standard_graph cyb_graph adaponder_bf16acts; do
  m=${r%_mma}
  m=${m%_graph}
  m=${m%_bf16acts}
  extra=()
  export TRAIN_FLAGS=""
  [ "$r" = "${m}_mma" ] && extra=(ADA_GEMM=bf16mma ADA_ATTN=mma)
  [ "$r" = "${m}_graph" ] && TRAIN_FLAGS="--cuda-graph"
  [ "$r" = "${m}_bf16acts" ] && TRAIN_FLAGS="--bf16-acts 1"
  why=$(need "$BUILD/bin/train_gpu" data)
  if [ -n "$why" ]; then not_run "train_$r" "$why"; continue; fi
  stage "train_$r" 60 train_one "$m" "$r" ${extra[@]+"${extra[@]}"}
  log="$LOGS/train_$r.log"
  first=$(sed -n 's/^step *[0-9]*\/[0-9]* | loss \([0-9.]*\).*/\1/p' "$log" | head -n 1)
  last=$(sed -n 's/^step *[0-9]*\/[0-9]* | loss \([0-9.]*\).*/\1/p' "$log" | tail -n 1)
  tok=$(sed -n 's/.*| \([0-9.]*k\{0,1\}\) tok\/s.*/\1/p' "$log" | tail -n 1)
  peak=$(sed -n 's/^peak GPU memory used (nvidia-smi): \([0-9]*\) MiB/\1/p' "$log" | tail -n 1)
  falling=false
  [ -n "$first" ] && [ -n "$last" ] && awk "BEGIN{exit !($last < $first)}" && falling=true
  echo "-- train_$r: loss ${first:-?} -> ${last:-?} (falling: $falling), ${tok:-?} tok/s, peak ${peak:-?} MiB"
  STAGES_JSON="${STAGES_JSON%\}}, \"first_loss\": $(json_str "${first:-}"), \"last_loss\": $(json_str "${last:-}"), \"loss_falling\": $falling, \"tok_per_s\": $(json_str "${tok:-}"), \"peak_mib\": $(json_str "${peak:-}")}"
  if [ "$falling" != true ] && [ "$STAGE_RC" -eq 0 ]; then
    echo "-- train_$r: the loss did not fall: counted as a failure"
    failed=$((failed + 1))
  fi
done

# ---- the data-parallel build (NCCL gradients, MPI start-up), one rank ---------
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicxx >/dev/null 2>&1; then
  not_run build_nccl "no MPI on this machine (mpirun, mpicxx)"
  not_run train_nccl "no MPI on this machine (mpirun, mpicxx)"
elif [ -z "$NVCC" ]; then
  not_run build_nccl "nvcc not found"
  not_run train_nccl "nvcc not found"
else
  stage build_nccl 180 make -j"$JOBS" "${MAKE_ARGS[@]}" NVCC="$NVCC" "$BUILD/bin/train_gpu_nccl"
  why=$(need "$BUILD/bin/train_gpu_nccl" data)
  if [ -n "$why" ]; then not_run train_nccl "$why"
  else
    ROOT_FLAG=$([ "$(id -u)" = 0 ] && echo --allow-run-as-root)
    stage train_nccl 90 mpirun $ROOT_FLAG -np 1 "$BUILD/bin/train_gpu_nccl" --method adaponder --steps 20 --seq "$SEQ" \
      --log-every 10 --eval-every 0 --eval-batches 2 --data "$DATA" --out "$BUILD/runs/adaponder-70m-nccl"
  fi
fi

# ---- summary ----------------------------------------------------------------
total=$(( $(date +%s) - t0 ))
{
  echo "{"
  echo "  \"date_utc\": $(json_str "$DATE"), \"commit\": $(json_str "$COMMIT"),"
  echo "  \"cpu\": $(json_str "${CPU:-?}"), \"cores\": $(nproc),"
  echo "  \"gpu\": $(json_str "$GPU_NAME"), \"compute_capability\": $(json_str "$GPU_CC"), \"gpu_memory\": $(json_str "$GPU_MEM"),"
  echo "  \"driver\": $(json_str "$DRIVER"), \"driver_cuda\": $(json_str "$DRIVER_CUDA"), \"nvcc\": $(json_str "$NVCC_VERSION"),"
  echo "  \"no_gpu_reason\": $(json_str "$GPU_REASON"), \"arch\": $(json_str "$ARCH"),"
  echo "  \"seconds\": $total, \"failed_stages\": $failed,"
  echo "  \"stages\": [$STAGES_JSON]"
  echo "}"
} > "$SUMMARY"
echo
echo "== done in ${total}s, $failed failed stage(s); summary: $SUMMARY"
exit "$failed"
