#!/usr/bin/env bash
# DeepGEMM beside our FP8 GEMMs on an H200 (or any sm_90a GPU) host in one command, offline
# (issue 29, item 1): builds our Python package (the extension and its staged package) and, at
# the same time, DeepGEMM's host module from its source in the git-ignored bundle folder .dg/
# (three builds of it: as its setup.py builds it, with -Bsymbolic and hidden symbols, and with its
# CUDA-runtime kernel loading); tries DeepGEMM's first JIT call with each build and JIT compiler
# (NVCC, NVRTC) until one passes, with a backtrace of any crash (gdb, else a SIGSEGV handler and
# addr2line); builds DeepGEMM's kernels for every case in parallel processes; then times both
# sides with bench/peers_deepgemm.py and prints the step summary and its table last.
#
# The bundle (.dg/, carried to the device; nothing of it enters the repository), made on a machine
# with the sources (DeepGEMM's commit and the submodule commits it pins, `git ls-tree HEAD
# third-party` in its repository):
#   .dg/DeepGEMM/                 `git archive` of DeepGEMM (DG_COMMIT inside names the commit),
#                                 with fmt's include/ at the pinned commit in third-party/fmt/include
#   .dg/cutlass-include.tar.gz    cutlass's include/ at the pinned commit (cute/ and cutlass/)
#   .dg/py312-include.tar.gz      CPython 3.12 headers (python3.12/Python.h ...), used only when
#                                 the interpreter has no Python.h (pybind11 needs them); e.g.
#                                 usr/include/python3.12 of Ubuntu's libpython3.12-dev
#                                 (3.12.3-1 for the H200 image's 3.12.3), with the deb's
#                                 x86_64-linux-gnu/python3.12/pyconfig.h copied over
#                                 python3.12/pyconfig.h (whose include of it would not resolve)
#
# Environment: OUT (logs; default build-deepgemm/out), DEEPGEMM_CHECK_BUDGET_S (default 400),
# DEEPGEMM_BUNDLE (default .dg), DEEPGEMM_BENCH_ARGS (extra bench/peers_deepgemm.py arguments),
# DEEPGEMM_WARM_PROCS (parallel JIT processes, default 12), DEEPGEMM_VARIANTS (the host-module
# builds to make and try in order; default "setup symbolic runtime-api"), TILEOPS_BUILD_DIR
# (default build-deepgemm).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 1
build="${TILEOPS_BUILD_DIR:-$repo/build-deepgemm}"
logs="${OUT:-$build/out}"
bundle="${DEEPGEMM_BUNDLE:-$repo/.dg}"
work="${TMPDIR:-/tmp}/deepgemm-check"
mkdir -p "$logs"
DEVICE_STEPS_BUDGET_S=${DEEPGEMM_CHECK_BUDGET_S:-400}
# shellcheck source=scripts/device-steps.sh disable=SC2034
source "$repo/scripts/device-steps.sh"
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
py=python3
{
  echo "DeepGEMM: $(cat "$bundle/DeepGEMM/DG_COMMIT" 2>/dev/null || echo '(no bundle)')"
  echo "cutlass: $(cat "$bundle/CUTLASS_COMMIT" 2>/dev/null), fmt: $(cat "$bundle/FMT_COMMIT" 2>/dev/null)"
  echo "python: $($py -c 'import sys; print(sys.version.split()[0])'), g++: $(g++ --version | head -1), CXX: ${CXX:-unset}"
  echo "gdb: $(command -v gdb || echo absent), addr2line: $(command -v addr2line || echo absent)"
} | tee -a "$logs/info.txt"

# Our package, in the background (the longest step): the extension and its staged package only.
(
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEOPS_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=OFF -DTILEOPS_BUILD_BENCH=OFF \
    -DTILEOPS_WERROR=OFF -DTILEOPS_TORCH=ON -DPython3_EXECUTABLE="$(command -v $py)" &&
    cmake --build "$build" -j "$(($(nproc) > 4 ? $(nproc) - 3 : 1))" --target tileops_python_stage
) > "$logs/tileops-build.log" 2>&1 &
tileops_pid=$!
tileops_t0=$SECONDS

# DeepGEMM's source tree: its JIT compiles with -I deep_gemm/include, which must hold cute/ and
# cutlass/ (its setup.py copies them there).
dg_src="$work/DeepGEMM"
dg_ok=0
if [[ -d "$bundle/DeepGEMM" ]]; then
  rm -rf "$work" && mkdir -p "$work/cutlass" && cp -r "$bundle/DeepGEMM" "$dg_src" &&
    tar -xzf "$bundle/cutlass-include.tar.gz" -C "$work/cutlass" &&
    cp -r "$work/cutlass/include/cute" "$work/cutlass/include/cutlass" "$dg_src/deep_gemm/include/" &&
    dg_ok=1
fi

torch_dir=$($py -c 'import os, torch; print(os.path.dirname(torch.__file__))')
py_inc=$($py -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
ext=$($py -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
cxx_std=$($py -c 'import torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); print(20 if v >= (2, 14) else 17)')
cxx11_abi=$($py -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))')
if [[ $dg_ok == 1 && ! -f "$py_inc/Python.h" ]]; then
  mkdir -p "$work/pyinc" && tar -xzf "$bundle/py312-include.tar.gz" -C "$work/pyinc"
  py_inc="$work/pyinc/python$($py -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
  [[ -f "$py_inc/Python.h" ]] || { echo "no Python.h for this interpreter in the bundle"; dg_ok=0; }
fi

# dg_build NAME FLAGS...: DeepGEMM's csrc/python_api.cpp into $work/so/NAME/_C$ext, with the
# flags of its setup.py (and torch's CUDAExtension: the extension defines, torch's and CUDA's
# include folders and libraries) plus FLAGS. The system's g++, not $CXX: on the H200 image $CXX
# is a wrapper (/opt/gcc/bin/g++) whose module faulted in std::regex at DeepGEMM's first JIT
# call, most likely from a static copy of libstdc++ linked into it
# (docs/perf/2026-12-04-h200-deepgemm.md); a module without libstdc++.so.6 among its needed
# libraries is reported.
cxx=$(command -v /usr/bin/g++ || command -v g++)
dg_build() {
  local name=$1
  shift
  mkdir -p "$work/so/$name"
  cd "$dg_src" && timeout 240 "$cxx" -std=c++"$cxx_std" -O3 -g -fPIC -shared -DNDEBUG -Wno-psabi \
    -Wno-deprecated-declarations -D_GLIBCXX_USE_CXX11_ABI="$cxx11_abi" \
    -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C "$@" \
    -I"$CUDA_HOME/include" -I"$CUDA_HOME/include/cccl" -Ideep_gemm/include \
    -I"$work/cutlass/include" -Ithird-party/fmt/include -I"$torch_dir/include" \
    -I"$torch_dir/include/torch/csrc/api/include" -I"$py_inc" csrc/python_api.cpp \
    -o "$work/so/$name/_C$ext" -L"$torch_dir/lib" -L"$CUDA_HOME/lib64" \
    -Wl,-rpath,"$torch_dir/lib" -lc10 -ltorch -ltorch_cpu -ltorch_python -lc10_cuda \
    -ltorch_cuda -lcudart -lnvrtc || return
  if command -v readelf > /dev/null && ! readelf -d "$work/so/$name/_C$ext" | grep -q 'libstdc++\.so'; then
    echo "WARNING: $name links libstdc++ statically (two C++ runtimes in one process)"
  fi
}
# As its setup.py builds it; with its own symbols bound inside the module (a definition of the
# same inline function in an already loaded library cannot stand in for its own); and loading
# the JIT kernels through the CUDA runtime instead of the driver API it looks up with dlsym.
read -r -a variants <<< "${DEEPGEMM_VARIANTS:-setup symbolic runtime-api}"
declare -A dg_flags=([setup]="" [symbolic]="-fvisibility=hidden -Wl,-Bsymbolic"
  [runtime-api]="-DDG_JIT_USE_RUNTIME_API")
declare -A dg_pids=()
if [[ $dg_ok == 1 ]]; then
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    (dg_build "$v" ${dg_flags[$v]}) > "$logs/dg-build-$v.log" 2>&1 &
    dg_pids[$v]=$!
  done
  t0=$SECONDS
  for v in "${variants[@]}"; do
    wait "${dg_pids[$v]}"
    rc=$?
    results+=("DeepGEMM host build ($v): $( ((rc == 0)) && echo ok || echo "FAIL($rc)") ($((SECONDS - t0)) s, dg-build-$v.log)")
  done
  tail -n 5 "$logs/dg-build-setup.log"
fi

# A SIGSEGV/SIGABRT handler (LD_PRELOAD) that prints each frame as module + offset, for addr2line.
cat > "$work/segv_bt.c" << 'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static void on_fault(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  fprintf(stderr, "segv_bt: signal %d, %d frames\n", sig, n);
  for (int i = 0; i < n; ++i) {
    Dl_info info;
    memset(&info, 0, sizeof info);
    if (dladdr(frames[i], &info) && info.dli_fname)
      fprintf(stderr, "segv_bt: #%d %s +0x%lx %s\n", i, info.dli_fname,
              (unsigned long)((char*)frames[i] - (char*)info.dli_fbase),
              info.dli_sname ? info.dli_sname : "?");
    else
      fprintf(stderr, "segv_bt: #%d %p\n", i, frames[i]);
  }
  fflush(stderr);
  signal(sig, SIG_DFL);
  raise(sig);
}
__attribute__((constructor)) static void install(void) {
  signal(SIGSEGV, on_fault);
  signal(SIGBUS, on_fault);
  signal(SIGABRT, on_fault);
}
EOF
gcc -shared -fPIC -O1 -o "$work/segv_bt.so" "$work/segv_bt.c" 2>> "$logs/info.txt" || true

export PYTHONPATH="$dg_src${PYTHONPATH:+:$PYTHONPATH}"
export DG_JIT_CACHE_DIR="$work/jit-cache"
# decode_backtrace LOG: the frames of DeepGEMM's module, as function and source line.
decode_backtrace() {
  command -v addr2line > /dev/null || return 0
  grep -E "^segv_bt: #[0-9]+ .*_C.*\.so \+0x" "$1" | while read -r _ frame so off _; do
    echo "$frame $(addr2line -f -C -i -e "$so" "$off" | paste -sd ' ')"
  done
}
chosen=""
if [[ $dg_ok == 1 ]]; then
  gdb_done=0
  for v in "${variants[@]}"; do
    [[ -f "$work/so/$v/_C$ext" ]] || continue
    cp "$work/so/$v/_C$ext" "$dg_src/deep_gemm/_C$ext"
    for jit in nvcc nvrtc; do
      log="dg-smoke-$v-$jit.log"
      nvrtc=$([[ $jit == nvrtc ]] && echo 1 || echo 0)
      rm -rf "$DG_JIT_CACHE_DIR"
      step "DeepGEMM first calls ($v, $jit)" 90 "$log" -- env DG_JIT_USE_NVRTC="$nvrtc" \
        DG_JIT_DEBUG=1 LD_PRELOAD="$work/segv_bt.so" stdbuf -o0 -e0 \
        $py -X faulthandler bench/peers_deepgemm.py --smoke
      rc=$?
      grep -E "^# |segv_bt|Error|error|Assertion" "$logs/$log" | head -30
      if ((rc == 0)); then
        chosen="$v $jit"
        break 2
      fi
      decode_backtrace "$logs/$log" | tee -a "$logs/$log.frames"
      if [[ $gdb_done == 0 && $jit == nvcc ]] && command -v gdb > /dev/null; then
        gdb_done=1
        rm -rf "$DG_JIT_CACHE_DIR"
        step "gdb backtrace ($v, $jit)" 120 dg-gdb.log -- env DG_JIT_USE_NVRTC=0 DG_JIT_DEBUG=1 \
          gdb -q -batch -ex "set pagination off" -ex run -ex bt -ex "info sharedlibrary" \
          --args $py bench/peers_deepgemm.py --smoke
        grep -E "^#[0-9]+ |signal" "$logs/dg-gdb.log" | head -30
      fi
    done
  done
  echo "DeepGEMM build and JIT compiler chosen: ${chosen:-none}" | tee -a "$logs/info.txt"
  results+=("DeepGEMM usable: ${chosen:-no}")
fi

wait "$tileops_pid"
rc=$?
results+=("tileops build: $( ((rc == 0)) && echo ok || echo "FAIL($rc)") ($((SECONDS - tileops_t0)) s, tileops-build.log)")
((rc == 0)) || tail -n 20 "$logs/tileops-build.log"
export PYTHONPATH="$build/python:$PYTHONPATH"

if [[ -n "$chosen" ]]; then
  DG_JIT_USE_NVRTC=$([[ $chosen == *nvrtc ]] && echo 1 || echo 0)
  export DG_JIT_USE_NVRTC
  procs=${DEEPGEMM_WARM_PROCS:-12}
  t0=$SECONDS
  pids=()
  for ((i = 0; i < procs; i++)); do
    # shellcheck disable=SC2086
    DG_PRINT_CONFIGS=1 timeout 150 $py bench/peers_deepgemm.py --warm --shard "$i/$procs" \
      ${DEEPGEMM_BENCH_ARGS:-} > "$logs/dg-warm-$i.log" 2>&1 &
    pids+=($!)
  done
  warm_rc=0
  for p in "${pids[@]}"; do wait "$p" || warm_rc=1; done
  results+=("DeepGEMM JIT builds, $procs processes: $( ((warm_rc == 0)) && echo ok || echo FAIL) ($((SECONDS - t0)) s, dg-warm-*.log)")
  grep -h "^# warm" "$logs"/dg-warm-*.log | sort | head -40
fi

# shellcheck disable=SC2086
step "bench (ours beside DeepGEMM)" 200 bench.log -- $py bench/peers_deepgemm.py \
  --csv "$logs/peers_deepgemm.csv" --markdown "$logs/peers_deepgemm.md" ${DEEPGEMM_BENCH_ARGS:-}
grep -vE "^\|" "$logs/bench.log" | tail -n 70

printf '\n== summary\n'
cat "$logs/info.txt"
printf '%s\n' "${results[@]}"
cat "$logs/peers_deepgemm.md" 2>/dev/null
# DeepGEMM's JIT kernels as built (their template arguments are the configurations it chose).
mkdir -p "$logs/dg-jit"
for d in "$work"/jit-cache/cache/kernel.*; do
  [[ -f "$d/kernel.cu" ]] && cp "$d/kernel.cu" "$logs/dg-jit/$(basename "$d").cu"
done
