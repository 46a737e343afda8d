#!/usr/bin/env bash
# The measured runs of 2026-12-03 on the one-H200 machine, in stages that each fit one device call
# (< 10 minutes).  Usage (device machine, repo root): bash benchmarks/gpu/session_2026-12-03.sh A|B|C
#   A: every requires_gpus test; benchmarks/train_vs_plain.py; benchmarks/train_graphs.py
#   B: benchmarks/communicator_overhead.py; benchmarks/comm_vs_torch.py; benchmarks/dist_call_overhead.py (NCCL
#      world 1); a gpucomm train run (single, dp on cuda:0 x2, ddp) whose records carry host cost per device
#   C: gpucomm bench (plain, prepared and graph forms) up to 64 MiB; benchmarks/advisor_dataparallel.py calibrated
#      from stage B's train records (when present)
#   D, E: the second pass after the first pass's fixes (tests and overheads; train graphs, train, bench forms)
#   F: a third pass of the GPU tests and gpucomm.comm's two overhead benchmarks after the last host-path cuts
# Everything lands in $OUT/<stage>.tar.gz (the device tool returns at most 8 files) plus a log per stage.
# NCCL_NVLS_ENABLE and the other multicast switches are left as the machine sets them.
set -uo pipefail
stage=$1
OUT=${OUT:-./gpu-out}; D=$(date -u +%F); R=$PWD/h200-$stage; rm -rf "$R"; mkdir -p "$R" "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MPLBACKEND=Agg
step() { local limit=$1; shift; echo "=== [$(date -u +%T)] $*"; timeout -s INT "$limit" "$@"; echo "=== rc=$?"; }
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
  python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} > "$R/env.txt" 2>&1
case $stage in
A)
  step 150 python3 -m pytest -q -p no:cacheprovider -rfEs -m requires_gpus tests > "$R/tests-gpu_h200x1_$D.log" 2>&1
  tail -n 25 "$R/tests-gpu_h200x1_$D.log"
  step 210 python3 benchmarks/train_vs_plain.py --rounds 5 --out "$R/train-vs-plain_h200x1_$D.txt" > "$R/train-vs-plain.log" 2>&1
  cat "$R/train-vs-plain_h200x1_$D.txt"; tail -n 5 "$R/train-vs-plain.log"
  step 190 python3 benchmarks/train_graphs.py --time-limit 140 --out "$R" > "$R/train-graphs.log" 2>&1
  cat "$R"/train-graphs_*.txt 2>/dev/null | tail -n 30; tail -n 5 "$R/train-graphs.log"
  ;;
B)
  step 150 python3 benchmarks/communicator_overhead.py --out "$R" --date "$D" > "$R/communicator-overhead.log" 2>&1
  cat "$R"/communicator-overhead_*.txt 2>/dev/null | tail -n 60
  step 200 python3 benchmarks/comm_vs_torch.py --out "$R" --date "$D" --budget-s 180 > "$R/comm-vs-torch.log" 2>&1
  awk '$0 ~ /^#/ || $(NF-2) < 0.97' "$R"/comm-vs-torch_h200x1_*.txt 2>/dev/null | tail -n 40
  step 120 python3 benchmarks/dist_call_overhead.py --backend nccl --out "$R" > "$R/dist-call-overhead.log" 2>&1
  tail -n 30 "$R"/dist-call-overhead_*.txt 2>/dev/null
  COLUMNS=120 step 100 python3 -m gpucomm train --strategies single,dp,ddp --model gpt-124m --global-batch 16 \
      --devices cuda:0,cuda:0 --steps 30 --warmup-steps 5 --out "$R/train-host_h200x1_$D" > "$R/train-host.log" 2>&1
  tail -n 30 "$R/train-host.log"
  ;;
C)
  step 240 python3 -m gpucomm bench -e 64M --out "$R/bench-forms_h200x1_$D" > "$R/bench.log" 2>&1
  tail -n 30 "$R/bench.log"
  if [ -n "${TRAIN_HOST:-}" ] && [ -d "$TRAIN_HOST" ]; then
    step 60 python3 benchmarks/advisor_dataparallel.py --calibrate "$TRAIN_HOST" > "$R/advisor-dataparallel_h200x1_$D.txt" 2>&1
    tail -n 20 "$R/advisor-dataparallel_h200x1_$D.txt"
  fi
  ;;
D)  # second pass after the fixes of the first: GPU tests, then the overhead benchmarks again
  step 110 python3 -m pytest -q -p no:cacheprovider -rfEs -m requires_gpus tests > "$R/tests-gpu-r2_h200x1_$D.log" 2>&1
  tail -n 12 "$R/tests-gpu-r2_h200x1_$D.log"
  step 140 python3 benchmarks/communicator_overhead.py --out "$R" --date "$D" > "$R/communicator-overhead.log" 2>&1
  cat "$R"/communicator-overhead_*.txt 2>/dev/null | awk '$0 ~ /^#/ || $(NF) < 0.97 || $(NF-1) < 0.97'
  step 170 python3 benchmarks/comm_vs_torch.py --out "$R" --date "$D" --budget-s 150 > "$R/comm-vs-torch.log" 2>&1
  awk '$0 ~ /^#/ || $(NF-2) < 0.97' "$R"/comm-vs-torch_h200x1_*.txt 2>/dev/null | tail -n 40
  step 100 python3 benchmarks/dist_call_overhead.py --backend nccl --out "$R" > "$R/dist-call-overhead.log" 2>&1
  tail -n 8 "$R"/dist-call-overhead_*.txt 2>/dev/null
  ;;
E)  # second pass: train graphs, a train run with host cost, bench with its forms, the advisor's DataParallel check
  step 170 python3 benchmarks/train_graphs.py --time-limit 130 --out "$R" > "$R/train-graphs.log" 2>&1
  tail -n 22 "$R"/train-graphs_*.txt 2>/dev/null
  COLUMNS=120 step 90 python3 -m gpucomm train --strategies single,dp,replicated,ddp --model gpt-124m --global-batch 16 \
      --devices cuda:0,cuda:0 --steps 30 --warmup-steps 5 --assert-equal --out "$R/train-host_h200x1_$D" > "$R/train-host.log" 2>&1
  tail -n 24 "$R/train-host.log"
  step 60 python3 benchmarks/advisor_dataparallel.py --calibrate "$R/train-host_h200x1_$D" > "$R/advisor-dataparallel_h200x1_$D.txt" 2>&1
  tail -n 12 "$R/advisor-dataparallel_h200x1_$D.txt"
  step 200 python3 -m gpucomm bench -e 8M --out "$R/bench-forms_h200x1_$D" > "$R/bench.log" 2>&1
  tail -n 5 "$R/bench.log"; python3 benchmarks/bench_forms.py --records "$R/bench-forms_h200x1_$D" 2>&1 | tail -n 30
  ;;
F)  # third pass, gpucomm.comm only, after the last host-path cuts: GPU tests, then both comm overhead benchmarks
  step 110 python3 -m pytest -q -p no:cacheprovider -rfEs -m requires_gpus tests > "$R/tests-gpu-r3_h200x1_$D.log" 2>&1
  tail -n 6 "$R/tests-gpu-r3_h200x1_$D.log"
  step 120 python3 benchmarks/communicator_overhead.py --out "$R" --date "$D" > "$R/communicator-overhead.log" 2>&1
  cat "$R"/communicator-overhead_*.txt 2>/dev/null | awk '$0 ~ /^#/ || $(NF) < 0.97 || $(NF-1) < 0.97'
  step 170 python3 benchmarks/comm_vs_torch.py --out "$R" --date "$D" --budget-s 150 > "$R/comm-vs-torch.log" 2>&1
  awk '$0 ~ /^#/ || $(NF-2) < 0.97' "$R"/comm-vs-torch_h200x1_*.txt 2>/dev/null | tail -n 30
  ;;
esac
rm -rf "$R"/*/plots 2>/dev/null
tar -czf "$OUT/$stage.tar.gz" -C "$PWD" "h200-$stage"
ls -la "$OUT"
