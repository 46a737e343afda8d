#!/usr/bin/env bash
# One device call (~8 min): does the host's moving show as the hypervisor's steal (gpucomm.hostload)?
#   1. the advisor's GPU tests (tests/advisor, requires_gpus: measure on CUDA with its busy pass last, the probe);
#   2. benchmarks/advisor_single_gpu.py, its thirteen cases (--host this; each case's steal and slowest/fastest
#      step, the probe's steal in its line);
#   3. the five unseen shapes (benchmarks/gpu/unseen_cases.sh);
#   4. benchmarks/host_adjacent.py (probe, case, probe; the steal of each), as many rounds as 170 s allow.
# Writes $OUT/run.tgz (w/: the logs, the results with their .json sidecars, README.txt with each stage's time).
# Usage (device machine, repo root): OUT=... bash benchmarks/gpu/advisor_steal.sh DATE RUN
set -uo pipefail
OUT=${OUT:-./gpu-out}; W=$OUT/w; mkdir -p "$W"
D=${1:-$(date -u +%F)}; R=${2:-r25}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
source "$(dirname "$0")/unseen_cases.sh"
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,power.draw --format=csv > "$W/nvidia-smi.txt" 2>&1
lscpu > "$W/lscpu.txt" 2>&1
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfEs -m requires_gpus tests/advisor tests/test_hostload.py \
    > "$W/pytest-advisor-gpu.txt" 2>&1
echo "pytest rc=$? at $((SECONDS - t0)) s: $(tail -1 "$W/pytest-advisor-gpu.txt")" | tee -a "$W/README.txt"
single_gpu_cases "$W" "$R" "$D" "$t0"
timeout -s INT 170 python3 benchmarks/host_adjacent.py --cases gpt-1.3b llama-1.1b-2k --rounds 3 \
    --out "$W/host-adjacent-${R}_h200x1_$D.txt" > "$W/host-adjacent.log" 2>&1
echo "host_adjacent rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"
tar -C "$OUT" -czf "$OUT/run.tgz" w && rm -rf "$W"
