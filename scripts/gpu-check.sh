#!/usr/bin/env bash
# The one command for an H200 (or any sm_90a GPU) machine with the dependencies installed:
# configure with CUDA for sm_90a, build, run the GPU tests, run them under compute-sanitizer
# (scripts/gpu-sanitize.sh: memcheck over all, racecheck and synccheck over the shared-memory
# kernels' tests), calibrate the GPU profile, run
# `tileops bench --all --device cuda`, run the peers script (bench/peers.py) when it exists, and
# print a summary table last. Fits in 10 minutes on a 16-core H200 host.
#
# Environment: TILEOPS_BUILD_DIR (default build-gpu), JOBS (default: cores), OUT (logs are written
# there when set, else to $BUILD/gpu-check), GPU_CHECK_PEERS (0: skip bench/peers.py), GPU_CHECK_OPS
# (the ops `tileops bench` runs; default --all), GPU_CHECK_TARGETS (what to build; default all),
# GPU_CHECK_CTEST (0: skip the plain ctest run, when the memcheck run of every GPU test is
# enough), GPU_CHECK_SANITIZE (0: skip the compute-sanitizer step; its limits: GPU_SANITIZE_MEMCHECK_S,
# GPU_SANITIZE_RACE_S, see scripts/gpu-sanitize.sh),
# GPU_CHECK_FLUSH (the L2 flush before each timed call, ours and the peers' alike: memset (the
# default: cudaMemsetAsync), kernel (a kernel writes the buffer; peers.py's fill_), or both (each of
# ours and each compiled peer timed after both)), TILEOPS_WERROR (default OFF here: another
# compiler's new warnings must not stop a GPU check; CI builds with -Werror). The last lines are
# the step summary and, when the peers ran, the table of bench/compare.py (ours against the peers,
# case by case).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build-gpu}"
jobs="${JOBS:-$(nproc)}"
logs="${OUT:-$build/gpu-check}"
mkdir -p "$logs"
export PYTHONUNBUFFERED=1
if [[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi

# Build dependencies as .deb files on offline hosts.
source "$repo/scripts/offline-deps.sh"

names=()
results=()
times=()
notes=()
# The whole check stays within GPU_CHECK_BUDGET_S (default 570 s): each step's time limit is
# the smaller of its own and what is left.
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-570}))
# run NAME TIMEOUT_S LOG -- command...: runs a step with a time limit, logs it, records the result.
run() {
  local name=$1 limit=$2 log=$3
  shift 4
  local t0=$SECONDS rc left=$((deadline - SECONDS))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    names+=("$name") results+=("SKIPPED") times+=("0s") notes+=("no time left")
    return 1
  fi
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$logs/$log"
  rc=${PIPESTATUS[0]}
  names+=("$name")
  times+=("$((SECONDS - t0))s")
  if ((rc == 0)); then
    results+=("ok")
  elif ((rc == 124 || rc == 137)); then
    results+=("TIMEOUT")
  else
    results+=("FAIL($rc)")
  fi
  notes+=("$log")
  return $rc
}

case "${GPU_CHECK_FLUSH:-memset}" in
  memset) our_flushes=(memset) peer_flush=memset ;;
  kernel) our_flushes=(kernel) peer_flush=fill ;;
  both) our_flushes=(memset kernel) peer_flush=fill,memset ;;
  *)
    echo "gpu-check: GPU_CHECK_FLUSH must be memset, kernel or both" >&2
    exit 2
    ;;
esac

# Log files (a remote runner may bring back 8): info, build, ctest-gpu, sanitize, bench.log
# (calibrate too), bench-<flush>.json (one or two), peers.log, peers.csv.
rm -f "$logs"/{info.txt,build.log,ctest-gpu.log,sanitize.log,bench.log,bench-memset.json,bench-kernel.json,peers.log,peers.csv}
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit$(git diff --quiet HEAD 2>/dev/null || echo ' (tree differs from the commit)')"
  echo "gpu: $gpu"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
  echo "host: $(nproc) cores, $(uname -r)"
} > "$logs/info.txt"

ok=1
run "configure (sm_90a)" 90 build.log -- \
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEOPS_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=ON -DTILEOPS_BUILD_BENCH=ON \
  -DTILEOPS_WERROR="${TILEOPS_WERROR:-OFF}" || ok=0
if ((ok)); then
  # -k 0: a target that fails to build (say, one test program) does not stop the others; the
  # steps below run with whatever was built, and the summary reports the build as failed.
  # GPU_CHECK_TARGETS: the targets to build (default: all of them).
  read -r -a targets <<< "${GPU_CHECK_TARGETS:-all}"
  run "build (-j$jobs)" 240 build.log -- cmake --build "$build" -j "$jobs" --target "${targets[@]}" \
    -- -k 0
fi
tileops="$build/tools/cli/tileops"
[[ -x "$tileops" ]] || ok=0
if ((ok)); then
  if [[ "${GPU_CHECK_CTEST:-1}" != 0 ]]; then
    run "ctest -L gpu" 90 ctest-gpu.log -- \
      ctest --test-dir "$build" --output-on-failure -j 4 -L gpu
  fi
  if [[ "${GPU_CHECK_SANITIZE:-1}" != 0 ]]; then
    run "compute-sanitizer" 600 ctest-gpu.log -- \
      env LOGS="$logs" bash scripts/gpu-sanitize.sh "$build"
  fi
  run "calibrate cuda" 60 bench.log -- "$tileops" calibrate --device cuda
  # GPU_CHECK_OPS: the ops to bench (default --all; the MoE workloads alone take minutes, as their
  # inputs are tens of GB: scripts/moe-check.sh benches those).
  read -r -a bench_ops <<< "${GPU_CHECK_OPS:---all}"
  for f in "${our_flushes[@]}"; do
    run "bench --flush $f" 360 bench.log -- "$tileops" bench "${bench_ops[@]}" --device cuda \
      --flush "$f" --format table --json "$logs/bench-$f.json"
  done
  if [[ -f bench/peers.py && "${GPU_CHECK_PEERS:-1}" != 0 ]]; then
    run "peers --flush $peer_flush" 300 peers.log -- \
      python3 bench/peers.py --flush "$peer_flush" --csv "$logs/peers.csv"
  fi
fi

echo
echo "== summary: $gpu, commit $commit, logs in $logs"
if [[ -f "$logs/ctest-gpu.log" ]]; then
  echo "gpu tests: $(grep -E 'tests passed|tests failed' "$logs/ctest-gpu.log" | tail -1)"
fi
if [[ -f "$logs/bench.log" ]]; then
  echo "bench: $(grep -E '^[0-9]+ cases:' "$logs/bench.log" | tail -1)"
fi
printf '%-28s %-10s %-7s %s\n' step result time log
for i in "${!names[@]}"; do
  printf '%-28s %-10s %-7s %s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}" "${notes[$i]}"
done
if [[ -f "$logs/peers.csv" ]]; then
  ours_json=()
  for f in "${our_flushes[@]}"; do
    [[ -f "$logs/bench-$f.json" ]] && ours_json+=(--ours "$logs/bench-$f.json")
  done
  ((${#ours_json[@]})) && python3 bench/compare.py "${ours_json[@]}" --peers "$logs/peers.csv"
fi
for r in "${results[@]}"; do
  [[ "$r" == ok ]] || exit 1
done
((ok)) || exit 1
