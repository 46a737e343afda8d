#!/usr/bin/env bash
# The single-GPU check of issue 16 on one H200 (about 60-90 s; one device call): benchmarks/advisor_single_gpu.py
# trains its thirteen models in a plain PyTorch loop and prints measured vs predicted step time, peak allocated
# and peak reserved, with the targets, predicted from the shipped profile src/gpucomm/advisor/compute/data/h200.json.
# Writes to $OUT: advisor-single-gpu_h200x1_<date>.txt and its .json sidecar (the measurements and the SM clock
# NVML read while each case ran, for
# `python benchmarks/advisor_single_gpu.py --repredict FILE` on any machine).
# Usage (device machine, repo root): bash benchmarks/gpu/advisor_single.sh
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python3 benchmarks/advisor_single_gpu.py --out "$OUT/advisor-single-gpu_h200x1_$(date -u +%F).txt"
echo "advisor_single_gpu rc=$?"
