#!/usr/bin/env bash
# Kernel durations by Nsight Compute, side by side: our RMSNorm kernels (bench_cuda_kernels, the
# default configuration of each case; TILEOPS_BENCH_STAGED=1 adds the staged configurations,
# TILEOPS_BENCH_LEAN=1 the lean streaming ones, TILEOPS_BENCH_REREAD=1 the re-reading ones) and
# torch.compile's kernels of the same workloads (bench/profile_norm_peers.py), under one method:
# ncu's duration of one launch with its own cache control (caches flushed before each profiled
# launch), clocks not locked. Prints one line per profiled launch (kernel, grid, block, registers,
# duration, DRAM bytes, achieved warp occupancy, L2 and L1 hit rates); torch.compile's kernels are
# kept as $OUT/triton-kernels.tgz. Needs a CUDA build with the bench
# (TILEOPS_BUILD_DIR, default build-gpu) or builds it. Logs in $OUT (default $build/ncu-norm).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${TILEOPS_BUILD_DIR:-build-gpu}"
logs="${OUT:-$build/ncu-norm}"
mkdir -p "$logs"
export PATH="$PATH:/usr/local/cuda/bin"
if [[ ! -x "$build/bench/bench_cuda_kernels" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEOPS_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=OFF -DTILEOPS_BUILD_BENCH=ON \
    -DTILEOPS_WERROR=OFF > "$logs/build.log" 2>&1
  cmake --build "$build" -j "$(nproc)" --target bench_cuda_kernels >> "$logs/build.log" 2>&1 ||
    { tail -30 "$logs/build.log"; exit 1; }
fi
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,launch__registers_per_thread,launch__grid_size,launch__block_size
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct
metrics+=,l1tex__t_sector_hit_rate.pct
filter="${NCU_NORM_FILTER:-^(fused_add_)?rms_norm/(bf16|fp32|fp16)/(1x4096|64x8192|2048x4096|2048x8192|2048x16384)(/threads=[^/]*(staged|streaming_unroll|reread)[^/]*)?/iter}"
# bench_cuda_kernels with one repetition launches each case twice (warm-up, timed): both profiled.
TILEOPS_BENCH_STAGED="${TILEOPS_BENCH_STAGED:-0}" TILEOPS_BENCH_LEAN="${TILEOPS_BENCH_LEAN:-0}" \
  TILEOPS_BENCH_REREAD="${TILEOPS_BENCH_REREAD:-0}" \
  TILEOPS_BENCH_REPS=1 timeout 240 ncu --clock-control none -k regex:rms \
  --csv --print-units base --page raw --metrics "$metrics" "$build/bench/bench_cuda_kernels" \
  --benchmark_filter="$filter" > "$logs/ours.csv" 2> "$logs/ours.err"
echo "ours rc=$?"
# torch.compile's kernels are compiled into a cache of their own, kept as $logs/triton-kernels.tgz
# (inductor's Python, Triton's IR and PTX) for reading offline.
inductor_cache="$(mktemp -d)"
TORCHINDUCTOR_CACHE_DIR="$inductor_cache" timeout 240 ncu --clock-control none --profile-from-start off \
  -k regex:triton --csv --print-units base --page raw \
  --metrics "$metrics" python3 bench/profile_norm_peers.py > "$logs/peers.csv" 2> "$logs/peers.err"
echo "peers rc=$?"
(cd "$inductor_cache" && find . \( -name '*.py' -o -name '*.ptx' -o -name '*.ttgir' -o -name '*.json' \) \
  -print0 | tar -czf "$logs/triton-kernels.tgz" --null -T -) || echo "no inductor cache kept"
python3 - "$logs/ours.csv" "$logs/peers.csv" <<'PY'
import csv, sys
for path in sys.argv[1:]:
    lines = open(path).read().splitlines()
    cases = [l[5:] for l in lines if l.startswith("case ")]
    rows = [l for l in lines if l.startswith('"')]
    if not rows:
        print(f"{path}: no profiled launch"); continue
    table = list(csv.DictReader(rows))[1:]  # the second line holds the units
    print(f"== {path} ({len(table)} launches)")
    for i, r in enumerate(table):
        name = r["Kernel Name"].split("(")[0][:60]
        label = cases[i] if i < len(cases) else ""
        num = lambda k: float((r[k] or "0").replace(",", ""))  # ncu writes thousands separators
        us = num("gpu__time_duration.sum") / 1e3
        rd = num("dram__bytes_read.sum") / 1e6
        wr = num("dram__bytes_write.sum") / 1e6
        occ = num("sm__warps_active.avg.pct_of_peak_sustained_active")
        hit = num("lts__t_sector_hit_rate.pct")
        l1 = num("l1tex__t_sector_hit_rate.pct")
        print(f"{label:22s} {name:60s} grid={r['launch__grid_size']:>6s} block={r['launch__block_size']:>5s}"
              f" regs={r['launch__registers_per_thread']:>4s} {us:8.2f} us  dram r/w {rd:7.2f}/{wr:7.2f} MB"
              f"  warps {occ:5.1f}%  L2 hit {hit:5.1f}%  L1 hit {l1:5.1f}%")
PY
