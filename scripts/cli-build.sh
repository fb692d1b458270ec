# Sourced by the A/B and profiling scripts (ab-check.sh, ncu-ab.sh, ncu-profile.sh).

# build_cli SOURCE BUILD_DIR [JOBS]: configures a Release build for sm_90a and builds the
# `tileops` command only (no tests, benches or torch).
build_cli() {
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEOPS_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DTILEOPS_BUILD_TESTS=OFF -DTILEOPS_BUILD_BENCH=OFF \
    -DTILEOPS_TORCH=OFF -DTILEOPS_WERROR=OFF && cmake --build "$2" -j "${3:-$(nproc)}" --target tileops_cli
}

# build_cli_pair BASE_TREE THIS_TREE PREFIX LOGS: both trees' `tileops` side by side (half the
# cores each) into PREFIX-a and PREFIX-b, logs LOGS/build-{a,b}.log; exits 1 with their tails when
# either fails.
build_cli_pair() {
  local jobs=$(($(nproc) / 2 > 1 ? $(nproc) / 2 : 1)) pid_a rc_a rc_b
  build_cli "$1" "$3-a" "$jobs" > "$4/build-a.log" 2>&1 &
  pid_a=$!
  build_cli "$2" "$3-b" "$jobs" > "$4/build-b.log" 2>&1
  rc_b=$?
  wait "$pid_a"
  rc_a=$?
  if ((rc_a != 0 || rc_b != 0)); then
    tail -n 20 "$4/build-a.log" "$4/build-b.log"
    exit 1
  fi
}

# split_case SCRIPT ENTRY: sets `op` and `workload` from ENTRY ("Op:workload"); exits 2 naming
# SCRIPT when it is not of that form.
split_case() {
  op=${2%%:*}
  workload=${2#*:}
  if [[ $op == "$2" || -z $op || -z $workload ]]; then
    echo "$1: case '$2' is not Op:workload" >&2
    exit 2
  fi
}
