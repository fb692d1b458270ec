#!/usr/bin/env bash
# tileops inside Hugging Face transformers models on an H200 host: installs the package as
# scripts/torch-gpu-check.sh does (skipped when TILEOPS_SITE names a folder where it is installed
# already), runs the integration tests on the CPU and CUDA (bf16 logits and generate, torch.compile,
# CUDA-graph decode) with the transformers module references, then `python -m tileops.models bench`
# over the cases of MODELS_CASES (default: all; `python -m tileops.models list`), writing
# models-bench.md and models-bench.json to OUT, and bench/attention_decode_layout.py (what serving
# a decode step's attention would cost in layout, beside sdpa) to attention-layout.md.
# MODELS_BENCH_ARGS adds bench options (e.g. --no-compile); MODELS_STEPS picks steps (default
# "install test bench interleave layout"). The interleave step times the compiled Llama-3-8B layer,
# unpatched and patched, in interleaved rounds at 1024-8192 tokens (`python -m tileops.models
# interleave`: where COMPILED_MIN_TOKENS sits) into interleaved.md and interleaved.json;
# MODELS_INTERLEAVE_ARGS replaces its options.
#
# Environment: OUT (default build-models-gpu/out), JOBS (default: cores), TILEOPS_SITE.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 1
build="$repo/build-models-gpu"
logs="${OUT:-$build/out}"
site="${TILEOPS_SITE:-${TMPDIR:-/tmp}/tileops-site}"
steps=" ${MODELS_STEPS:-install test bench interleave layout} "
mkdir -p "$logs"
# No network on the GPU hosts: transformers' hub kernels (its FP8 experts') fail at once.
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc)}" HF_HUB_OFFLINE=1
if [[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
rc=0

if [[ "$steps" == *" install "* && -z "${TILEOPS_SITE:-}" ]]; then
  # shellcheck source=scripts/offline-deps.sh
  source "$repo/scripts/offline-deps.sh"
  if compgen -G "$repo/.whl/*.whl" > /dev/null; then  # Liger-Kernel and other extras, offline
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$repo"/.whl/*.whl
  fi
  echo "== pip install (CUDA sm_90a)"
  python3 -m pip install --no-build-isolation --no-deps --target "$site" --upgrade . \
    -Cbuild-dir="$build" -Ccmake.define.TILEOPS_CUDA=ON -Ccmake.define.TILEOPS_WERROR=OFF \
    > "$logs/pip.log" 2>&1 || { tail -n 30 "$logs/pip.log"; exit 1; }
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
# The bench runs the installed package outside the checkout: the commit is named from here, as
# scripts/device-steps.sh names it (a copy's COMMIT file first, as `git archive` copies carry).
if [[ -f "$repo/COMMIT" ]]; then TILEOPS_COMMIT="$(cat "$repo/COMMIT")"; else
  TILEOPS_COMMIT="$(git -C "$repo" rev-parse --short HEAD 2> /dev/null)"; fi
export TILEOPS_COMMIT
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', \
transformers.__version__, torch.cuda.get_device_name())"

cd "$logs" || exit 1  # tileops is imported from the installed package, not from the checkout
if [[ "$steps" == *" test "* ]]; then
  echo "== pytest: integrations and transformers references (CPU and CUDA)"
  python3 -m pytest "$repo/python/tests/test_integrations_transformers.py" \
    "$repo/python/tests/test_integrations_generate.py" "$repo/python/tests/test_integrations_compile.py" \
    "$repo/python/tests/test_integrations_attention.py" "$repo/python/tests/test_transformers.py" \
    -q -p no:cacheprovider -rs -o log_level=WARNING \
    > "$logs/models-pytest.log" 2>&1 || rc=1
  tail -n 15 "$logs/models-pytest.log"
fi

if [[ "$steps" == *" bench "* ]]; then
  cases=()
  for c in ${MODELS_CASES:-}; do cases+=(--case "$c"); done
  echo "== python -m tileops.models bench ${cases[*]} ${MODELS_BENCH_ARGS:-}"
  # shellcheck disable=SC2086
  python3 -m tileops.models bench --device cuda "${cases[@]}" ${MODELS_BENCH_ARGS:-} \
    --markdown "$logs/models-bench.md" --json "$logs/models-bench.json" \
    2> "$logs/models-bench.err" || rc=1
  tail -n 5 "$logs/models-bench.err"
fi

if [[ "$steps" == *" interleave "* ]]; then
  # The options as the shell would split them (the modes' list is one quoted word).
  eval "interleave_args=(${MODELS_INTERLEAVE_ARGS:---case llama3-8b-layer --tokens 1024,2048,4096,8192 \
    --modes \"unpatched compiled,tileops compiled\"})"
  echo "== python -m tileops.models interleave ${interleave_args[*]}"
  python3 -m tileops.models interleave --device cuda "${interleave_args[@]}" \
    --markdown "$logs/interleaved.md" --json "$logs/interleaved.json" \
    > /dev/null 2> "$logs/interleaved.err" || rc=1
  grep -E "^\||^Host noise" "$logs/interleaved.md" 2> /dev/null || tail -n 5 "$logs/interleaved.err"
fi

if [[ "$steps" == *" layout "* ]]; then
  echo "== bench/attention_decode_layout.py --device cuda"
  python3 "$repo/bench/attention_decode_layout.py" --device cuda --contexts 512,2048,8192,32768 \
    --prefill 64,512,4096 > "$logs/attention-layout.md" 2>&1 || rc=1
  cat "$logs/attention-layout.md"
fi
exit $rc
