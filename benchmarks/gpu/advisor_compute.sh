#!/usr/bin/env bash
# The measured compute of issue 16 on one H200 (about 6-9 minutes; one device call):
# 1. `gpucomm measure` with the default grid writes the shipped profile src/gpucomm/advisor/compute/data/h200.json
#    (the file `--hardware h200-nvswitch` reads, and H100 profiles derive from); it keeps what it measured when
#    stopped by the timeout (SIGTERM);
# 2. benchmarks/advisor_single_gpu.py trains its models in a plain PyTorch loop and prints measured vs predicted
#    step time, peak allocated and peak reserved, with the targets, predicted from the profile of step 1.
# Writes to $OUT: h200.json, measure.log, advisor-single-gpu_h200x1_<date>.txt, single.log, env.txt
# Usage (device machine, repo root): bash benchmarks/gpu/advisor_compute.sh
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"; D=$(date -u +%F)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MPLBACKEND=Agg
P=src/gpucomm/advisor/compute/data/h200.json
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
  python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } > "$OUT/env.txt" 2>&1
t0=$(date +%s)
timeout 320 python3 -m gpucomm measure --out "$P" > "$OUT/measure.log" 2>&1
rc=$?; echo "measure rc=$rc in $(( $(date +%s) - t0 )) s"; tail -n 4 "$OUT/measure.log"
case $rc in 0|124) ;; *) tail -n 30 "$OUT/measure.log"; exit 1 ;; esac  # 124: the timeout stopped it, what it measured is kept
cp "$P" "$OUT/h200.json" || exit 1
t0=$(date +%s)
timeout 250 python3 benchmarks/advisor_single_gpu.py --out "$OUT/advisor-single-gpu_h200x1_$D.txt" > "$OUT/single.log" 2>&1
echo "single-gpu rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 30 "$OUT/single.log"
