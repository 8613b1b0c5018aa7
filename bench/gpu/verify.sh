#!/usr/bin/env bash
# GPU verification in one command (docs/gpu-validation.md): on a machine with one H100 or H200, builds parplan with
# the CUDA backend, runs the `gpu`-labelled tests, calibrates the GPU, runs three plans rank-local (predicted vs
# measured per-GPU peak memory and compute time) with the shipped and with the measured profile, and measures the
# kernels PyTorch stacks run (bench/gpu/kernels.py: attention backends, bf16 vs fp8 GEMMs, grouped expert GEMMs, an
# eager decoder layer) when python3 has torch.
# Results go to $OUT (default: out/gpu). Usage: bash bench/gpu/verify.sh
# PARPLAN_PREBUILT=DIR uses binaries built elsewhere instead of building (a machine without the build's headers):
# DIR holds parplan, libparplan_cuda.so, parplan_runtime_gpu_tests and any shared library they need (libfmt.so.9).
# WARMUP and STEPS (default 2 and 5) set the rank-local runs' warm-up and measured steps.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-out/gpu}"
mkdir -p "$OUT"
JOBS="$(nproc)"
WARMUP="${WARMUP:-2}"
STEPS="${STEPS:-5}"

command -v nvidia-smi >/dev/null || { echo "verify.sh: no nvidia-smi: this needs a GPU machine" >&2; exit 77; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/device.txt"
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) GPU=h200; CLUSTER=dgx-h200 ;;
  *H100*) GPU=h100; CLUSTER=dgx-h100 ;;
  *) echo "verify.sh: expected an H100 or H200" >&2; exit 2 ;;
esac

if command -v python3 >/dev/null && python3 -c 'import torch' 2>/dev/null; then
  timeout 180 python3 bench/gpu/kernels.py "$OUT/kernels.json" >"$OUT/kernels.txt" 2>&1 || echo "verify.sh: kernels.py failed (see kernels.txt)"
fi

if [[ -n "${PARPLAN_PREBUILT:-}" ]]; then
  D="$(cd "$PARPLAN_PREBUILT" && pwd)"
  LIBS="$D"
  for lib in libnccl.so.2 libcublasLt.so.13; do
    found="$(find /usr/lib /usr/local /opt -name "$lib" 2>/dev/null | head -1)"
    [[ -n "$found" ]] && LIBS="$LIBS:$(dirname "$found")"
  done
  export LD_LIBRARY_PATH="$LIBS:${LD_LIBRARY_PATH:-}"
  export PARPLAN_CUDA_PLUGIN="$D/libparplan_cuda.so"
  P="$D/parplan"
  "$D/parplan_runtime_gpu_tests" 2>&1 | tee "$OUT/gpu-tests.txt"
else
  cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARPLAN_WITH_CUDA=ON >"$OUT/configure.txt"
  cmake --build build/gpu -j "$JOBS" >"$OUT/build.txt"
  P=build/gpu/cli/parplan
  ctest --test-dir build/gpu -L gpu --output-on-failure 2>&1 | tee "$OUT/gpu-tests.txt"
fi
"$P" --version | tee "$OUT/version.txt"

"$P" calibrate --backend cuda --gpu "$GPU" --out "$OUT/measured-$GPU.json" --json >"$OUT/calibrate.json"

# Three plans stressing different terms; rank 0 holds stage 0 (the most in-flight activations).
declare -A PLANS=(
  [gpt3-175b-tp8-pp8-selective]="--model gpt3-175b --gpus 64 --tp 8 --pp 8 --recompute selective --sp --global-batch 64"
  [llama3-70b-tp8-pp4-full]="--model llama3-70b --gpus 64 --tp 8 --pp 4 --recompute full --sp --micro-batch 1 --global-batch 64 --distributed-optimizer"
  [llama2-7b-tp2-dp4-nopp]="--model llama2-7b --gpus 8 --tp 2 --micro-batch 2 --global-batch 64 --distributed-optimizer --recompute selective --sp"
)
for name in "${!PLANS[@]}"; do
  # shellcheck disable=SC2086
  "$P" estimate ${PLANS[$name]} --gpu "$GPU" --cluster "$CLUSTER" -o "$OUT/$name.plan.json" --json >"$OUT/$name.estimate.json" || true
  "$P" run --plan "$OUT/$name.plan.json" --backend cuda --rank 0 --warmup "$WARMUP" --steps "$STEPS" --json \
      >"$OUT/$name.run-shipped.json"
  "$P" run --plan "$OUT/$name.plan.json" --backend cuda --rank 0 --warmup "$WARMUP" --steps "$STEPS" --json \
      --profile "$OUT/measured-$GPU.json" >"$OUT/$name.run-measured.json"
done
echo "verify.sh: results in $OUT"
