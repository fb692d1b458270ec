#!/usr/bin/env bash
# Before/after benchmark of two source trees on one GPU in one session: builds the `tileops`
# command of this checkout (B) and of a base tree (A, e.g. `git archive <commit>` unpacked into an
# ignored folder) side by side, then runs `tileops bench` over the same ops, alternating A and B
# for AB_ROUNDS rounds so that drift hits both, and prints bench/ab_compare.py's table last (per
# case: each side's best round, the change, and the spread of each side's own rounds, the noise).
#
# Usage: scripts/ab-check.sh BASE_TREE   Environment: OUT (logs; default build-ab), AB_ROUNDS
# (default 2), AB_OPS (the ops and --workload options of `tileops bench`; default the norm, rope
# and quantization ops and the MoE layers' main workloads), AB_BUDGET_MS (per case, default 40).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base="$(cd "${1:?usage: scripts/ab-check.sh BASE_TREE}" && pwd)"
cd "$repo"
logs="${OUT:-$repo/build-ab}"
mkdir -p "$logs"
export PATH="$PATH:/usr/local/cuda/bin"
source "$repo/scripts/offline-deps.sh"
source "$repo/scripts/cli-build.sh"
build_cli_pair "$base" "$repo" "$repo/build-ab" "$logs"

default_ops="RMSNormFwdOp FusedAddRMSNormFwdOp LongRoPEFwdOp PerTokenGroupQuantFP8FwdOp \
  MoETopKRoutingFwdOp MoEPrePermuteFwdOp MoEPostPermuteFwdOp MoEGroupedGemmFwdOp \
  MoEGroupedGemmFP8FwdOp FusedMoEFwdOp"
read -r -a ops <<< "${AB_OPS:-$default_ops}"
a_json=() b_json=()
for round in $(seq 1 "${AB_ROUNDS:-2}"); do
  for side in a b; do
    json="$logs/$side$round.json"
    echo "== round $round, side $side ($(date -u +%H:%M:%S))"
    "$repo/build-ab-$side/tools/cli/tileops" bench "${ops[@]}" --device cuda -q \
      --budget-ms "${AB_BUDGET_MS:-40}" --format csv --json "$json" > "$logs/$side$round.csv" 2>&1 ||
      echo "side $side round $round: tileops bench exited $?"
    if [[ $side == a ]]; then a_json+=("$json"); else b_json+=("$json"); fi
  done
done
python3 "$repo/bench/ab_compare.py" --a "${a_json[@]}" --b "${b_json[@]}" --names before after |
  tee "$logs/ab.txt"
