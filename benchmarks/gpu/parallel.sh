#!/usr/bin/env bash
# gpucomm.parallel on one H200 (about 3 minutes; at most 4): the GPU tests of gpucomm.parallel and of the
# train strategies rebuilt on it (requires_gpus; the multi-GPU ones skip on one GPU), then
# benchmarks/parallel_vs_dataparallel.py (GPT-124M bf16 16x1024 per replica, fused AdamW; part 1 one device:
# plain, eager, graphs, dp; part 2 cuda:0 x2: host, launch and GPU time per replica-step; 3 rounds; targets:
# eager <= 1.02x plain's time and <= 1.03x its memory, eager launch <= dp's, graphs launch <= 1/32 of GPU).
# Writes to $OUT: tests-parallel_h200x1_<date>.log, parallel-vs-dataparallel_h200x1_<date>.txt
# Usage (device machine, repo root): bash benchmarks/gpu/parallel.sh
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"; D=$(date -u +%F)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 MPLBACKEND=Agg
timeout 90 python3 -m pytest -q -p no:cacheprovider -rfEs -m requires_gpus --durations=10 tests/parallel \
    tests/train/test_graphs.py tests/train/strategies/test_replicated.py > "$OUT/tests-parallel_h200x1_$D.log" 2>&1
echo "tests rc=$?"; tail -n 12 "$OUT/tests-parallel_h200x1_$D.log"
timeout 150 python3 benchmarks/parallel_vs_dataparallel.py --rounds 3 --replicas 2 --out "$OUT" > /dev/null 2>&1
echo "benchmark rc=$?"; cat "$OUT"/parallel-vs-dataparallel_h200x1_*.txt
