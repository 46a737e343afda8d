#!/usr/bin/env bash
# Busy times for the shipped H200 profile, then the single-GPU check priced from it (one device call, ~8 min):
#   1. with TESTS=1, the busy-time tests of tests/advisor/compute/test_measure.py on this GPU;
#   2. gpucomm measure --merge src/gpucomm/advisor/compute/data/h200.json: the grid's points the profile lacks,
#      and the busy times (kernels' device time under torch.profiler) of its layer, matmul and attention
#      points, their measured times kept (a SIGTERM from the timeout saves what was done);
#   3. that profile copied over the tree's h200.json on this machine only, then benchmarks/advisor_single_gpu.py
#      (its thirteen cases) and the five shapes of advisor-single-gpu-unseen (the same --case specs).
# Writes $OUT/run.tgz (w/: h200.json, the logs, the two results with their .json sidecars).
# Usage (device machine, repo root): OUT=... bash benchmarks/gpu/advisor_busy.sh DATE RUN
set -uo pipefail
OUT=${OUT:-./gpu-out}; W=$OUT/w; mkdir -p "$W"
D=${1:-$(date -u +%F)}; R=${2:-r15}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
source "$(dirname "$0")/unseen_cases.sh"
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,power.draw --format=csv > "$W/nvidia-smi.txt" 2>&1
[ -n "${TESTS:-}" ] && { timeout 90 python3 -m pytest -q -p no:cacheprovider tests/advisor/compute/test_measure.py \
    -k "busy or tiny" > "$W/pytest-busy.txt" 2>&1; echo "pytest rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"; }
timeout 340 python3 -m gpucomm measure --merge src/gpucomm/advisor/compute/data/h200.json --out "$W/h200.json" \
    > "$W/measure-merge.txt" 2>&1; echo "merge rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"
[ -s "$W/h200.json" ] && cp "$W/h200.json" src/gpucomm/advisor/compute/data/h200.json
timeout 100 python3 benchmarks/advisor_single_gpu.py --out "$W/advisor-single-gpu-${R}_h200x1_$D.txt" \
    > "$W/single.log" 2>&1; echo "single rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"
timeout 75 python3 benchmarks/advisor_single_gpu.py \
    "${UNSEEN_CASES[@]}" \
    --out "$W/advisor-single-gpu-unseen-${R}_h200x1_$D.txt" > "$W/unseen.log" 2>&1
echo "unseen rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"
tar -C "$OUT" -czf "$OUT/run.tgz" w && rm -rf "$W"
