#!/usr/bin/env bash
# The single-GPU check with the host probe read per (family, checkpointing mode) — one device call, ~6-7 min:
#   1. the advisor's GPU tests (tests/advisor, requires_gpus: the probe on the shipped profile's GPU among them),
#      or with SUITE=1 the whole GPU suite (benchmarks/gpu/tests.sh gpu, about 3 minutes more);
#   2. benchmarks/advisor_single_gpu.py, its thirteen cases, --host this (the probe before and after the cases);
#   3. the five unseen shapes of advisor-single-gpu-unseen (the same --case specs as benchmarks/gpu/advisor_busy.sh).
# Writes $OUT/run.tgz (w/: the logs, the two results with their .json sidecars, README.txt with each stage's time).
# Usage (device machine, repo root): OUT=... bash benchmarks/gpu/advisor_modes.sh DATE RUN
set -uo pipefail
OUT=${OUT:-./gpu-out}; W=$OUT/w; mkdir -p "$W"
D=${1:-$(date -u +%F)}; R=${2:-r20}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,power.draw --format=csv > "$W/nvidia-smi.txt" 2>&1
lscpu > "$W/lscpu.txt" 2>&1
if [ -n "${SUITE:-}" ]; then  # the whole GPU suite (benchmarks/gpu/tests.sh gpu, ~3 min) instead of the advisor's
  OUT=$W bash benchmarks/gpu/tests.sh gpu > "$W/tests-gpu-stdout.txt" 2>&1
  echo "tests.sh gpu rc=$? at $((SECONDS - t0)) s: $(tr '\n' ' ' < "$W/tests-summary.txt")" | tee -a "$W/README.txt"
else
  timeout 120 python3 -m pytest -q -p no:cacheprovider -rfEs -m requires_gpus tests/advisor \
      > "$W/pytest-advisor-gpu.txt" 2>&1
  echo "pytest rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"
fi
timeout 200 python3 benchmarks/advisor_single_gpu.py --out "$W/advisor-single-gpu-${R}_h200x1_$D.txt" \
    > "$W/single.log" 2>&1; echo "single rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"
timeout 170 python3 benchmarks/advisor_single_gpu.py \
    --case name=u-llama-mha-6k,family=llama,layers=12,hidden=2048,heads=16,kv_heads=16,ffn=5504,vocab=32000,seq=6144,mb=1 \
    --case name=u-gpt-op,family=gpt,layers=20,hidden=1792,heads=14,kv_heads=14,ffn=7168,vocab=50304,seq=2048,mb=2,ac=op \
    --case name=u-llama-full,family=llama,layers=28,hidden=3072,heads=24,kv_heads=8,ffn=8192,vocab=128256,seq=2048,mb=3,ac=full \
    --case name=u-gpt-small,family=gpt,layers=10,hidden=640,heads=10,kv_heads=10,ffn=2560,vocab=50304,seq=1536,mb=12,upcast=0 \
    --case name=u-llama-op-8k,family=llama,layers=14,hidden=1536,heads=12,kv_heads=4,ffn=4096,vocab=128256,seq=8192,mb=1,ac=op \
    --out "$W/advisor-single-gpu-unseen-${R}_h200x1_$D.txt" > "$W/unseen.log" 2>&1
echo "unseen rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"
tar -C "$OUT" -czf "$OUT/run.tgz" w && rm -rf "$W"
