#!/usr/bin/env bash
# The built-in GPT against a nanoGPT-style loop on one H200 (expected about 1.5 minutes):
# 1. benchmarks/gpt_vs_nanogpt.py — gpucomm train's single on gpt-124m (16 x 1024, bf16 autocast, fused AdamW)
#    against a nanoGPT-style model and loop of the same shape, 5 interleaved rounds of 3 + 20 steps; prints
#    builtin/nanogpt step time and peak memory ratios against the target 1.02x (about 50 s);
# 2. the train GPU tests (bf16 equality of every strategy with the loss as nanoGPT computes it) and the bench
#    memory refusal's GPU test (about 40 s).
# Writes to $OUT: gpt-vs-nanogpt_h200x1_<date>.txt (its first lines hold the command), tests-gpt_h200x1_<date>.log
# Usage (device machine, repo root): bash benchmarks/gpu/gpt.sh
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"; D=$(date -u +%F)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 MPLBACKEND=Agg
timeout 80 python3 benchmarks/gpt_vs_nanogpt.py --rounds 5 --out "$OUT/gpt-vs-nanogpt_h200x1_$D.txt" > /dev/null 2>&1
echo "gpt_vs_nanogpt rc=$?"; cat "$OUT/gpt-vs-nanogpt_h200x1_$D.txt"
timeout 60 python3 -m pytest -q -p no:cacheprovider -rfEs tests/train/test_gpu.py tests/bench/test_memory.py \
    > "$OUT/tests-gpt_h200x1_$D.log" 2>&1
echo "tests rc=$?"; tail -n 8 "$OUT/tests-gpt_h200x1_$D.log"
