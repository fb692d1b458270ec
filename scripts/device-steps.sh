# Sourced by the one-command checks sized for a short GPU lease (scripts/paged-check.sh,
# scripts/fp8-dense-check.sh) after they set `repo` and `logs`: nvcc on PATH, the offline build
# dependencies, a deadline of DEVICE_STEPS_BUDGET_S seconds (the caller sets it first), the
# machine's description in $logs/info.txt (printed), and `step`, which runs each command within
# what is left of the deadline and records its result in `results`.
export PYTHONUNBUFFERED=1
if [[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
source "$repo/scripts/offline-deps.sh"

deadline=$((SECONDS + ${DEVICE_STEPS_BUDGET_S:-200}))
results=()
# step NAME LIMIT_S LOG -- command...: the command within min(LIMIT_S, what is left), logged.
step() {
  local name=$1 limit=$2 log=$3
  shift 4
  local left=$((deadline - SECONDS)) t0=$SECONDS rc
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    results+=("$name: SKIPPED (no time left)")
    return 1
  fi
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=5 "$limit" "$@" >> "$logs/$log" 2>&1
  rc=$?
  results+=("$name: $( ((rc == 0)) && echo ok || echo "FAIL($rc)") ($((SECONDS - t0)) s, $log)")
  return $rc
}

{
  # A copy without .git (git archive) names its commit in COMMIT.
  if [[ -f "$repo/COMMIT" ]]; then echo "commit: $(cat "$repo/COMMIT")"; else
    echo "commit: $(git -C "$repo" rev-parse HEAD)"; fi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  echo "nvcc: $(nvcc --version | tail -1)"
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'
  echo "host: $(nproc) cores"
} > "$logs/info.txt" 2>&1
cat "$logs/info.txt"
