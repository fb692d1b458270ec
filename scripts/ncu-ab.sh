#!/usr/bin/env bash
# Before/after kernel durations of two source trees at locked clocks, on one GPU in one session:
# builds the `tileops` command of this checkout (B) and of a base tree (A, e.g. `git archive
# <commit>` unpacked into an ignored folder) side by side, then for each case runs `tileops bench`
# under `ncu --clock-control base` (the GPU held at its base clock), alternating A and B for
# NCU_AB_ROUNDS rounds, and prints bench/ncu_ab.py's table last. For compute-bound kernels whose
# bench rounds at the clocks as found spread more than the change being measured (the attention
# kernels on an H100: up to 12%); scripts/ab-check.sh times whole calls at the clocks as found.
#
# Usage: scripts/ncu-ab.sh BASE_TREE   Environment: NCU_AB_CASES (required: "Op:workload ...",
# the op's manifest workload labels), NCU_AB_KERNEL (required: ncu's -k filter, e.g.
# regex:attention_varlen_kernel), NCU_AB_ROUNDS (default 2), NCU_AB_LAUNCHES (launches profiled
# per run, default 5, after NCU_AB_SKIP = 2 skipped), OUT (logs; default build-ncu-ab).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base="$(cd "${1:?usage: scripts/ncu-ab.sh BASE_TREE}" && pwd)"
cases="${NCU_AB_CASES:?set NCU_AB_CASES to \"Op:workload ...\"}"
kernel="${NCU_AB_KERNEL:?set NCU_AB_KERNEL to the -k filter of ncu}"
cd "$repo"
logs="${OUT:-$repo/build-ncu-ab}"
mkdir -p "$logs/ncu"
export PATH="$PATH:/usr/local/cuda/bin"
source "$repo/scripts/offline-deps.sh"
source "$repo/scripts/cli-build.sh"
build_cli_pair "$base" "$repo" "$repo/build-ncu-ab" "$logs"

for entry in $cases; do
  split_case ncu-ab "$entry"
  for round in $(seq 1 "${NCU_AB_ROUNDS:-2}"); do
    for side in a b; do
      ncu --metrics gpu__time_duration.sum --clock-control base --cache-control all -k "$kernel" \
        --launch-skip "${NCU_AB_SKIP:-2}" -c "${NCU_AB_LAUNCHES:-5}" --csv \
        "$repo/build-ncu-ab-$side/tools/cli/tileops" bench "$op" --device cuda -q --budget-ms 5 \
        --no-check --workload "$workload" > "$logs/ncu/$op.$workload-$side$round.csv" 2>&1 ||
        echo "$workload, side $side, round $round: ncu exited $?"
    done
  done
  echo "== $workload done ($(date -u +%H:%M:%S))"
done
python3 "$repo/bench/ncu_ab.py" "$logs/ncu" --names before after | tee "$logs/ncu-ab.txt"
