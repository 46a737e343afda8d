#!/usr/bin/env bash
# Train runs for the advisor's one-GPU accuracy check (benchmarks/advisor_accuracy.py --calibrate-on ...):
# calibrate on single gpt-124m at global batch 8 and 16; hold out single at 32, ddp (world size 1) at 8/16/32,
# and gpt-350m single/ddp at 8/16. Each configuration runs twice (a/b) for the A/A noise.
# Usage: bash benchmarks/gpu/advisor_records.sh RESULTS_DIR
set -uo pipefail
R=$1/h200-acc; mkdir -p "$R"
for rep in a b; do
  for b in 8 16 32; do timeout 90 python3 -m gpucomm train --strategies single,ddp --model gpt-124m --devices cuda:0 --nproc 1 \
    --global-batch $b --steps 20 --warmup-steps 6 --out "$R/$rep-gpt-124m-$b" --no-report 2>&1 | tail -n 3; done
  for b in 8; do timeout 90 python3 -m gpucomm train --strategies single,ddp --model gpt-350m --devices cuda:0 --nproc 1 \
    --global-batch $b --steps 20 --warmup-steps 6 --out "$R/$rep-gpt-350m-$b" --no-report 2>&1 | tail -n 3; done
done
python3 benchmarks/advisor_accuracy.py --records "$R"/* --calibrate-on single:gpt-124m:8 single:gpt-124m:16 \
  --save "$1/advisor-accuracy_h200_2026-12-02.md" 2>&1 | tail -n 40
