#!/usr/bin/env bash
# The measured runs on the one-H200 machine, in stages that each fit one device call.
# Usage (device machine, repo root): bash benchmarks/gpu/h200_session.sh A|B|C
#   A: topo, every requires_gpus test, link ceilings, benchmarks/comm_vs_torch.py (8 B - 1 GiB)
#   B: gpucomm bench (all ops, all backends), gpucomm train GPT-124M (all strategies), dist/harness overhead on NCCL
#   C: the train runs the advisor's accuracy check holds out, then benchmarks/advisor_accuracy.py
# Results go to $OUT/<stage>.tar.gz (one file: the device tool returns at most 8) plus a log.
# NCCL_NVLS_ENABLE and the other multicast switches are left exactly as the machine sets them.
set -uo pipefail
stage=$1
OUT=${OUT:-./gpu-out}; R=$PWD/h200-$stage; rm -rf "$R"; mkdir -p "$R" "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MPLBACKEND=Agg
gc() { python3 -m gpucomm "$@"; }
step() { local limit=$1; shift; echo "=== [$(date -u +%T)] $*"; timeout "$limit" "$@"; echo "=== rc=$?"; }
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
  python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} > "$R/env.txt" 2>&1
case $stage in
A)
  gc topo > "$R/topo.txt" 2>&1; gc topo --json > "$R/topo.json" 2>&1
  step 230 python3 -m pytest -q -p no:cacheprovider --timeout=120 -rfEs tests 2>&1 | tail -n 60 | tee "$R/pytest-gpu.log"
  step 60 python3 benchmarks/ceilings.py --mib 1024 --json "$R/ceilings.jsonl" 2>&1 | tee "$R/ceilings.txt"
  step 200 python3 benchmarks/comm_vs_torch.py --json "$R/comm_vs_torch.jsonl" 2>&1 | tee "$R/comm_vs_torch.txt" | tail -n 120
  step 60 python3 benchmarks/comm_vs_torch.py --ops gather_to_cpu,scatter_from_pageable,scatter_from_pinned \
      --min-bytes 64M --max-bytes 256M --host-max-bytes 256M --json "$R/comm_vs_torch_host.jsonl" 2>&1 | tee "$R/comm_vs_torch_host.txt"
  ;;
B)
  step 270 python3 -m gpucomm bench --out "$R/bench_h200-1gpu" 2>&1 | tail -n 40 > "$R/bench.log"; tail -n 25 "$R/bench.log"
  step 150 python3 -m gpucomm train --strategies single,dp,replicated,ddp --model gpt-124m --steps 50 --warmup-steps 10 \
      --global-batch 16 --devices cuda:0,cuda:0 --assert-equal --out "$R/train_h200-1gpu_gpt124m" 2>&1 | tail -n 40 | tee "$R/train.log"
  step 60 python3 benchmarks/dist_overhead.py --nprocs 1 --backend nccl --out "$R/dist-overhead_h200-nccl-ws1.md" 2>&1 | tail -n 30
  step 60 python3 benchmarks/harness_overhead.py --nproc 1 --out "$R/harness-overhead_h200-nccl-ws1.md" 2>&1 | tail -n 30
  ;;
C)
  timeout 500 bash benchmarks/gpu/advisor_records.sh "$R" 2>&1 | tail -n 80
  ;;
esac
tar -czf "$OUT/$stage.tar.gz" -C "$PWD" "h200-$stage"
ls -la "$OUT"
