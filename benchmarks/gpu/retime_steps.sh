#!/usr/bin/env bash
# The shipped H200 profile's whole steps timed again, interleaved in rounds (benchmarks/remeasure_steps.py
# --rounds), then the thirteen single-GPU cases predicted from the shipped profile, on one H200; on an H100, the
# GPU test suite and the cases and unseen shapes predicted from the profile derived for it with this machine's
# host (--host this, the benchmark's default on a GPU; --repredict --host profile prices the profile's host from
# the same measurements on CPU) — a record: the H200 profile's steps need an H200.  One device call.  Writes $OUT/w/: the retimed profile and its log (H200), the
# cases' results with their .json sidecars, boot-id.txt, nvidia-smi.txt, README.txt (each stage's exit status
# and time).
# Usage (device machine, repo root): OUT=... bash benchmarks/gpu/retime_steps.sh DATE RUN [SECONDS]
#   SECONDS: the retime's budget (default 330; no round starts that the time left cannot hold)
set -uo pipefail
d=$1; r=$2; budget=${3:-330}
OUT=${OUT:-./gpu-out}; W=$OUT/w; mkdir -p "$W"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MPLBACKEND=Agg
source benchmarks/gpu/unseen_cases.sh
t0=$SECONDS
note() { echo "$* at $((SECONDS - t0)) s" | tee -a "$W/README.txt"; }
cat /proc/sys/kernel/random/boot_id > "$W/boot-id.txt"
git log --oneline -1 > "$W/head.txt" 2>/dev/null
nvidia-smi > "$W/nvidia-smi.txt" 2>&1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
if [[ "$gpu" == *H200* ]]; then
  timeout -s TERM $((budget + 40)) python3 benchmarks/remeasure_steps.py src/gpucomm/advisor/compute/data/h200.json \
      --out "$W/h200-retimed.json" --rounds 5 --seconds "$budget" > "$W/retime.log" 2>&1
  note "retime rc=$? ($(tail -n 1 "$W/retime.log"))"
  timeout 200 python3 benchmarks/advisor_single_gpu.py --out "$W/advisor-single-gpu-${r}_h200x1_$d.txt" \
      > /dev/null 2> "$W/single.err"
  note "single rc=$?"
else
  OUT=$W bash benchmarks/gpu/tests.sh > /dev/null 2>&1; note "tests rc=$? ($(tr '\n' ';' < "$W/tests-summary.txt"))"
  timeout 200 python3 benchmarks/advisor_single_gpu.py --hardware h100-nvswitch \
      --out "$W/advisor-single-gpu-derived-h100-${r}_h100x1_$d.txt" > /dev/null 2> "$W/single.err"
  note "single rc=$?"
  timeout 170 python3 benchmarks/advisor_single_gpu.py --hardware h100-nvswitch "${UNSEEN_CASES[@]}" \
      --out "$W/advisor-single-gpu-unseen-derived-h100-${r}_h100x1_$d.txt" > /dev/null 2> "$W/unseen.err"
  note "unseen rc=$?"
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv \
    >> "$W/nvidia-smi.txt" 2>&1
