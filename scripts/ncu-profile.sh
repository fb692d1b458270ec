#!/usr/bin/env bash
# What limits a kernel: one launch per case profiled by Nsight Compute's full set (caches
# flushed, clocks as found) under `tileops bench`, summarised by bench/ncu_summary.py (duration,
# throughputs, issue slots, the busiest pipes, the warps' top stall reasons); the reports are
# kept in $OUT/ncu-profile.tgz for the ncu GUI or `ncu --import`. Needs the `tileops` command of
# a CUDA build (TILEOPS_BUILD_DIR, default build-gpu) or builds it (scripts/cli-build.sh).
#
# Usage: NCU_PROFILE_CASES="Op:workload ..." NCU_PROFILE_KERNEL=regex:<kernel> scripts/ncu-profile.sh
# Environment: NCU_PROFILE_SKIP (launches skipped before the profiled one, default 3), OUT (logs;
# default $build/ncu-profile).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
cases="${NCU_PROFILE_CASES:?set NCU_PROFILE_CASES to \"Op:workload ...\"}"
kernel="${NCU_PROFILE_KERNEL:?set NCU_PROFILE_KERNEL to the -k filter of ncu}"
build="${TILEOPS_BUILD_DIR:-build-gpu}"
logs="${OUT:-$build/ncu-profile}"
mkdir -p "$logs/reports"
export PATH="$PATH:/usr/local/cuda/bin"
cli="$build/tools/cli/tileops"
source "$repo/scripts/cli-build.sh"
if [[ ! -x $cli ]]; then
  source "$repo/scripts/offline-deps.sh"
  build_cli "$repo" "$build" > "$logs/build.log" 2>&1 || { tail -30 "$logs/build.log"; exit 1; }
fi
for entry in $cases; do
  split_case ncu-profile "$entry"
  report="$logs/reports/$op.$workload"
  timeout 300 ncu --set full --import-source no --cache-control all --clock-control none \
    -k "$kernel" --launch-skip "${NCU_PROFILE_SKIP:-3}" -c 1 -f -o "$report" \
    "$cli" bench "$op" --device cuda -q --budget-ms 5 --no-check --workload "$workload" \
    > "$report.log" 2>&1 || echo "$entry: ncu exited $?"
  ncu --import "$report.ncu-rep" --page raw --csv > "$report.raw.csv" 2> /dev/null
  python3 "$repo/bench/ncu_summary.py" "$report.raw.csv" --title "$op $workload" |
    tee -a "$logs/summary.txt"
done
tar -C "$logs" -czf "$logs/ncu-profile.tgz" reports && rm -rf "$logs/reports"
