#!/usr/bin/env bash
# gpucomm train's harness on one H200 (about 4 minutes): the GPU tests of the harness, then
# benchmarks/train_vs_plain.py (a plain PyTorch loop vs gpucomm train's single and ddp at world size 1,
# GPT-124M bf16 16x1024, fused AdamW, 5 interleaved rounds; targets single <= 1.02x time, <= 1.03x memory,
# ddp <= 1.05x time), then one gpucomm train run (single; dp over cuda:0 x2; ddp) whose records carry the
# host cost per device, the GPU time and DataParallel's phases.  Writes to $OUT:
#   tests-train-harness_h200x1_<date>.log, train-vs-plain_h200x1_<date>.txt, train-host_h200x1_<date>/
# Usage (device machine, repo root): bash benchmarks/gpu/train_harness.sh
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"; D=$(date -u +%F)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 MPLBACKEND=Agg
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfEs tests/train/test_gpu.py tests/train/test_loop.py \
    tests/train/strategies/test_dp.py > "$OUT/tests-train-harness_h200x1_$D.log" 2>&1
echo "tests rc=$?"; tail -n 8 "$OUT/tests-train-harness_h200x1_$D.log"
timeout 200 python3 benchmarks/train_vs_plain.py --rounds 5 --out "$OUT/train-vs-plain_h200x1_$D.txt" > /dev/null 2>&1
echo "train_vs_plain rc=$?"; cat "$OUT/train-vs-plain_h200x1_$D.txt"
COLUMNS=120 timeout 100 python3 -m gpucomm train --strategies single,dp,ddp --model gpt-124m --global-batch 16 \
    --devices cuda:0,cuda:0 --steps 30 --warmup-steps 5 --out "$OUT/train-host_h200x1_$D" 2>&1 | tail -n 30
echo "train rc=${PIPESTATUS[0]}"
