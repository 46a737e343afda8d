#!/usr/bin/env bash
# The single-GPU check with the host probe read per (family, checkpointing mode) — one device call, ~6-7 min:
#   1. the advisor's GPU tests (tests/advisor, requires_gpus: the probe on the shipped profile's GPU among them),
#      or with SUITE=1 the whole GPU suite (benchmarks/gpu/tests.sh gpu, about 3 minutes more);
#   2. benchmarks/advisor_single_gpu.py, its thirteen cases, --host this (the probe before and after the cases);
#   3. the five unseen shapes of advisor-single-gpu-unseen (benchmarks/gpu/unseen_cases.sh).
# Writes $OUT/run.tgz (w/: the logs, the two results with their .json sidecars, README.txt with each stage's time).
# Usage (device machine, repo root): OUT=... bash benchmarks/gpu/advisor_modes.sh DATE RUN
set -uo pipefail
OUT=${OUT:-./gpu-out}; W=$OUT/w; mkdir -p "$W"
D=${1:-$(date -u +%F)}; R=${2:-r20}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
source "$(dirname "$0")/unseen_cases.sh"
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
single_gpu_cases "$W" "$R" "$D" "$t0"
tar -C "$OUT" -czf "$OUT/run.tgz" w && rm -rf "$W"
