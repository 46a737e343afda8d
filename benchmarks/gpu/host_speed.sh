#!/usr/bin/env bash
# One device call (~7 min): what moves a host-paced step on a lent machine?
#   1. benchmarks/host_speed.py --seconds 150: a pure-Python workload, the CUDA launch path and the probe's GPT op
#      step, back to back, with the garbage collector's time in the op steps and the hypervisor's steal;
#   2. benchmarks/advisor_single_gpu.py, its thirteen cases (each case's collections, steal and step spread);
#   3. the five unseen shapes (benchmarks/gpu/unseen_cases.sh).
# Writes $OUT/run.tgz (w/: the logs, the results with their .json sidecars, README.txt with each stage's time).
# Usage (device machine, repo root): OUT=... bash benchmarks/gpu/host_speed.sh DATE RUN
set -uo pipefail
OUT=${OUT:-./gpu-out}; W=$OUT/w; mkdir -p "$W"
D=${1:-$(date -u +%F)}; R=${2:-r26}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
source "$(dirname "$0")/unseen_cases.sh"
t0=$SECONDS
lscpu > "$W/lscpu.txt" 2>&1
timeout -s INT 190 python3 benchmarks/host_speed.py --seconds 150 --out "$W/host-speed_h200x1_$D.txt" \
    > "$W/host-speed.log" 2>&1; echo "host_speed rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"
single_gpu_cases "$W" "$R" "$D" "$t0"
tar -C "$OUT" -czf "$OUT/run.tgz" w && rm -rf "$W"
