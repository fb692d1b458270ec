#!/usr/bin/env bash
# The PyTorch boundary on an H200 host (torch >= 2.10 and CUDA installed, no network): builds and
# installs the package with pip (scikit-build-core, CUDA for sm_90a, Google Benchmark programs
# on), runs the pytest suite on the CPU and CUDA (opcheck, cold compiles, the compiled block,
# CUDA-graph capture and replay, bit-for-bit equality with the C++ path, the transformers
# references), then the host-overhead benchmark (Python boundary call against F.rms_norm) and
# bench_op_overhead's CUDA cases (the C++ op call and the bare launch of the same kernel), and
# prints a summary table last. TORCH_GPU_CHECK_PEERS=0 skips bench/peers.py (our ops from Python
# against torch.compile, F.rms_norm and Liger-Kernel).
#
# Environment: OUT (logs go there when set, else build-torch-gpu/out), JOBS (default: cores).
# Offline hosts: build dependencies as .deps/*.deb (see scripts/gpu-check.sh), extra Python
# packages as wheels in .whl/ (installed with --target, never into the image's environment).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="$repo/build-torch-gpu"
logs="${OUT:-$build/out}"
site="${TMPDIR:-/tmp}/tileops-site"
mkdir -p "$logs"
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc)}"
if [[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
# Build dependencies as .deb files on offline hosts.
source "$repo/scripts/offline-deps.sh"
if compgen -G "$repo/.whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$repo"/.whl/*.whl
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

names=() results=() notes=()
step() {  # step NAME LOG TIMEOUT_S -- command...
  local name=$1 log=$2 limit=$3 t0=$SECONDS rc
  shift 4
  printf '\n== %s\n' "$name"
  timeout "$limit" "$@" > "$logs/$log" 2>&1
  rc=$?
  tail -n 25 "$logs/$log"
  names+=("$name")
  results+=("$([[ $rc == 0 ]] && echo ok || echo "FAILED ($rc)")")
  notes+=("$((SECONDS - t0)) s, $log")
  return $rc
}

python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"

step "pip install (CUDA sm_90a)" pip.log 420 -- python3 -m pip install -v --no-build-isolation \
  --no-deps --target "$site" --upgrade . -Cbuild-dir="$build" \
  -Ccmake.define.TILEOPS_CUDA=ON -Ccmake.define.TILEOPS_BUILD_BENCH=ON \
  -Ccmake.define.TILEOPS_WERROR=OFF || { echo "pip install failed"; }

cd "$logs"  # tileops is imported from the installed package, not from the checkout
step "pytest (CPU and CUDA)" pytest.log 300 -- python3 -m pytest "$repo/python/tests" -q \
  -p no:cacheprovider -rs -o log_level=WARNING
grep -E "passed|failed" "$logs/pytest.log" | tail -1

step "boundary host overhead" overhead.log 120 -- python3 "$repo/bench/torch_boundary_overhead.py" \
  --json "$logs/overhead.json"
step "bench_op_overhead (C++)" cpp_overhead.log 120 -- "$build/bench/bench_op_overhead" \
  --benchmark_filter=Cuda --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

# Our ops from Python beside the peers (torch.compile, F.rms_norm, Liger-Kernel when its wheel is
# in .whl/), one statistic, one L2 flush.
if [[ "${TORCH_GPU_CHECK_PEERS:-1}" != 0 ]]; then
  step "peers from Python" peers.log 330 -- python3 "$repo/bench/peers.py" --iters 50 \
    --csv "$logs/peers.csv"
fi

# One build, several torch versions: an extension built elsewhere against another torch (same
# tileops sources, TORCH_TARGET_VERSION 2.10), dropped into the package installed here.
if [[ -f "$repo/prebuilt/libtileops_torch.so" ]]; then
  rm -rf "${TMPDIR:-/tmp}/tileops-compat" && mkdir -p "${TMPDIR:-/tmp}/tileops-compat"
  cp -r "$site/tileops" "${TMPDIR:-/tmp}/tileops-compat/"
  cp "$repo/prebuilt/libtileops_torch.so" "${TMPDIR:-/tmp}/tileops-compat/tileops/"
  step "prebuilt extension (other torch)" compat.log 180 -- env \
    PYTHONPATH="${TMPDIR:-/tmp}/tileops-compat:$PYTHONPATH" python3 -m pytest \
    "$repo/python/tests/test_opcheck.py" "$repo/python/tests/test_native_path.py" -q \
    -p no:cacheprovider -k cuda -o log_level=WARNING
fi

printf '\n== summary\n'
for i in "${!names[@]}"; do printf '%-28s %-12s %s\n' "${names[$i]}" "${results[$i]}" "${notes[$i]}"; done
grep -E "passed|failed" "$logs/pytest.log" | tail -1
cat "$logs/overhead.log" 2>/dev/null | tail -8
grep -E "median" "$logs/cpp_overhead.log" 2>/dev/null
if [[ -f "$logs/peers.csv" ]]; then  # per case: each peer's median µs, tileops' last
  python3 - "$logs/peers.csv" <<'PY'
import csv, sys
from collections import defaultdict
rows = defaultdict(dict)
for r in csv.DictReader(line for line in open(sys.argv[1]) if not line.startswith("#")):
    rows[(r["op"], r["case"])][r["peer"]] = float(r["median_us"])
for (op, case), peers in rows.items():
    best = min((us, p) for p, us in peers.items() if p != "tileops")
    ours = peers.get("tileops")
    mine = f"tileops {ours:8.2f}" if ours is not None else "tileops    -"
    print(f"{op[:20]:20s} {case[:30]:30s} best peer {best[1][:14]:14s} {best[0]:8.2f}  {mine}")
PY
fi
