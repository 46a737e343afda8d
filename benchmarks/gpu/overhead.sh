#!/usr/bin/env bash
# The three plain-call overhead benchmarks on one GPU (4 x cuda:0; NCCL world 1), into $OUT, in one device call.
#
# Usage (device machine, repo root): bash benchmarks/gpu/overhead.sh [DATE]
#   1. benchmarks/communicator_overhead.py  LocalCommunicator plain and prepared vs torch.cuda.comm out=
#   2. benchmarks/comm_vs_torch.py          gpucomm.comm's functions vs torch.cuda.comm's
#   3. benchmarks/dist_call_overhead.py     gpucomm.dist plain and prepared vs raw torch.distributed (NCCL)
# Each step has its own time limit and is stopped with SIGINT, so a step that runs long still writes the
# rows it finished.  Writes into $OUT: communicator-overhead_*.{txt,jsonl}, comm-vs-torch_*.{txt,jsonl},
# dist-call-overhead_*.txt, env.txt, a log per step, and summary.txt (every cell below its target).
# Expected on one H200: about 4.5 minutes (the three limits add up to 290 s; the 2026-12-03 runs of the
# same benchmarks took about 2, 2.5 and 1.5 minutes with wider sweeps).
set -uo pipefail
D=${1:-$(date -u +%F)}
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
step() { local limit=$1; shift; echo "=== [$(date -u +%T)] $*"; timeout -s INT "$limit" "$@"; echo "=== rc=$?"; }
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
  python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} > "$OUT/env.txt" 2>&1
step 100 python3 benchmarks/communicator_overhead.py --devices cuda:0,cuda:0,cuda:0,cuda:0 --rounds 9 \
    --out "$OUT" --date "$D" > "$OUT/communicator-overhead.log" 2>&1
step 110 python3 benchmarks/comm_vs_torch.py --devices cuda:0,cuda:0,cuda:0,cuda:0 --budget-s 85 \
    --out "$OUT" --date "$D" > "$OUT/comm-vs-torch.log" 2>&1
step 80 python3 benchmarks/dist_call_overhead.py --backend nccl --rounds 15 --out "$OUT" \
    > "$OUT/dist-call-overhead.log" 2>&1
{
  echo "# cells below target (plain < 0.97 or prepared < 1.0), $D"
  awk '$0 ~ /^#/ || ($1 !~ /^op/ && NF >= 7 && ($(NF-1) < 0.97 || $NF < 1.0))' "$OUT"/communicator-overhead_*.txt
  awk '$0 ~ /^#/ || ($1 !~ /^op/ && NF >= 9 && $(NF-2) < 0.97)' "$OUT"/comm-vs-torch_*.txt
  grep -E "worst cell|median over" "$OUT"/dist-call-overhead_*.txt
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
