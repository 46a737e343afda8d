#!/usr/bin/env bash
# The advisor's measured compute on one H200 (expected about 5 minutes; at most 9 with the timeouts below):
# 1. gpucomm measure: the default grid (layers of both families at tp 1-8 and every checkpointing mode, their
#    matmuls alone, SDPA, embedding, head + loss, fused AdamW, whole small steps) -> the shipped H200 profile
#    src/gpucomm/advisor/compute/data/h200.json (its --estimate says about 100 s at planning rates; allow 3-4 min);
# 2. benchmarks/advisor_single_gpu.py: ten plain-PyTorch models (GPT-2/Llama styles, 0.15-2.9 B parameters,
#    seq 1,024-8,192, mb 1-16, ac none/full/op) timed and their peaks read, against gpucomm advise on the profile
#    just measured (about 1 minute);
# 3. the compute GPU test (a tiny layer measured on CUDA, seconds).
# Writes to $OUT: h200.json (commit it as src/gpucomm/advisor/compute/data/h200.json),
#   advisor-single-gpu_h200x1_<date>.txt (its first lines hold the command), tests-compute_h200x1_<date>.log, log
# Usage (device machine, repo root): bash benchmarks/gpu/advisor_compute.sh
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"; D=$(date -u +%F)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 MPLBACKEND=Agg
PROFILE=src/gpucomm/advisor/compute/data/h200.json
mkdir -p "$(dirname "$PROFILE")"
{
  echo "== gpucomm measure --out $PROFILE"
  timeout 330 python3 -m gpucomm measure --out "$PROFILE"
  echo "measure rc=$?"
  cp "$PROFILE" "$OUT/h200.json" 2>/dev/null
  echo "== benchmarks/advisor_single_gpu.py"
  timeout 200 python3 benchmarks/advisor_single_gpu.py --out "$OUT/advisor-single-gpu_h200x1_$D.txt"
  echo "single-gpu rc=$?"
  echo "== compute GPU test"
  timeout 60 python3 -m pytest -q -p no:cacheprovider -rfEs tests/advisor/compute/test_measure.py \
      > "$OUT/tests-compute_h200x1_$D.log" 2>&1
  echo "tests rc=$?"; tail -n 4 "$OUT/tests-compute_h200x1_$D.log"
} 2>&1 | tee "$OUT/log"
