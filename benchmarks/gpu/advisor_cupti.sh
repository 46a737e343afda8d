#!/usr/bin/env bash
# One device call (~7 min): does a finished torch.profiler pass slow later host work, and the single-GPU check
# with the probe that runs no profiler, in a child process (benchmarks/advisor_single_gpu.py since 2e74b29):
#   1. benchmarks/cupti_linger.py --rounds 3 (9 fresh processes of about 15 s each, estimated): the probe's op
#      steps clean / after a busy pass / after one with TEARDOWN_CUPTI=1, interleaved;
#   2. benchmarks/advisor_single_gpu.py, its thirteen cases (--host this: the child-process probe);
#   3. the five unseen shapes (benchmarks/gpu/unseen_cases.sh).
# If cupti_linger shows the pass slowing the op steps, the shipped profile's whole steps (timed the old way, a
# busy pass after each) are next: benchmarks/remeasure_steps.py (measure's busy pass now follows every point).
# Writes $OUT/run.tgz (w/: the logs, the results with their .json sidecars, README.txt with each stage's time).
# Usage (device machine, repo root): OUT=... bash benchmarks/gpu/advisor_cupti.sh DATE RUN
set -uo pipefail
OUT=${OUT:-./gpu-out}; W=$OUT/w; mkdir -p "$W"
D=${1:-$(date -u +%F)}; R=${2:-r24}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
source "$(dirname "$0")/unseen_cases.sh"
t0=$SECONDS
lscpu > "$W/lscpu.txt" 2>&1
timeout -s INT 220 python3 benchmarks/cupti_linger.py --rounds 3 --out "$W/cupti-linger_h200x1_$D.txt" \
    > "$W/cupti-linger.log" 2>&1; echo "cupti_linger rc=$? at $((SECONDS - t0)) s" | tee -a "$W/README.txt"
single_gpu_cases "$W" "$R" "$D" "$t0"
tar -C "$OUT" -czf "$OUT/run.tgz" w && rm -rf "$W"
