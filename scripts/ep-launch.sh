#!/usr/bin/env bash
# Launches one process per GPU for expert parallelism, without mpirun: starts N copies of the
# command with WORLD_SIZE, RANK, LOCAL_RANK (the GPU) and TILEOPS_EP_ID_FILE set (the
# torchrun-style variables make_nccl_transport_from_env reads; rank 0 writes its NCCL id to the
# file, in a new temporary folder, and the other ranks read it there), and waits. When a rank
# exits with an error, the others get TILEOPS_EP_GRACE_S seconds (default 60: their transports
# raise ExpertParallelCommError within TILEOPS_EP_TIMEOUT_S) and are then killed, so the launch
# never hangs. Exit code: the first failing rank's, else 0.
#
#   scripts/ep-launch.sh -n 8 build/tools/cli/tileops ep-check --tokens 4096
#
# Environment: TILEOPS_EP_GRACE_S, TILEOPS_EP_TIMEOUT_S.
set -uo pipefail

usage() { echo "usage: $0 -n <ranks> <command> [args...]" >&2; exit 2; }
[[ "${1:-}" == "-n" && -n "${2:-}" ]] || usage
ranks=$2
shift 2
(($# > 0)) || usage
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || usage

id_dir=$(mktemp -d) || exit 1
trap 'rm -rf "$id_dir"' EXIT

pids=()
for ((r = 0; r < ranks; r++)); do
  WORLD_SIZE=$ranks RANK=$r LOCAL_RANK=$r TILEOPS_EP_ID_FILE=$id_dir/nccl-id "$@" &
  pids+=($!)
done

status=0
declare -A live  # pid -> rank
for r in "${!pids[@]}"; do live[${pids[$r]}]=$r; done
while ((${#live[@]} > 0)); do
  wait -n -p done_pid "${!live[@]}"
  code=$?
  rank=${live[$done_pid]}
  unset "live[$done_pid]"
  if ((code != 0)); then
    echo "$0: rank $rank exited with $code" >&2
    if ((status == 0)); then
      status=$code
      # The others should raise on their own within the transport's timeout; never wait forever.
      (sleep "${TILEOPS_EP_GRACE_S:-60}"; kill "${pids[@]}" 2> /dev/null) &
      killer=$!
    fi
  fi
done
[[ -n "${killer:-}" ]] && kill "$killer" 2> /dev/null
exit "$status"
