#!/usr/bin/env bash
# The plain-call overhead benchmarks on one GPU (4 x cuda:0; NCCL world 1), into $OUT, in one device call.
#
# Usage (device machine, repo root): OUT=/some/dir bash benchmarks/gpu/overhead.sh [DATE]
#   1. benchmarks/communicator_overhead.py  LocalCommunicator plain and prepared vs torch.cuda.comm out=
#   2. benchmarks/stack_vs_chain.py         one-device reduce/all_reduce stacked vs chained (2, 8, 32 MiB)
#   3. benchmarks/comm_vs_torch.py          gpucomm.comm's functions vs torch.cuda.comm's
#   4. benchmarks/dist_call_overhead.py     gpucomm.dist plain and prepared vs raw torch.distributed (NCCL)
# Each step has its own time limit and is stopped with SIGINT, so a step that runs long still writes the
# rows it finished (marked "# interrupted").  Writes into $OUT, each table with its command inside:
# communicator-overhead_h200x1_DATE.{txt,jsonl}, stack-vs-chain_h200x1_DATE.txt,
# comm-vs-torch_h200x1_DATE.{txt,jsonl}, dist-call-overhead_h200-nccl-ws1_DATE.txt, env_h200x1_DATE.txt,
# a log per step, and summary.txt (every cell below its target, and the stacked/chained table).
# Step limits add up to 275 s; with the start of four Python processes expect about 4.5 minutes on one H200.
# CPU smoke of the same Python (no GPU): SMOKE=1 OUT=/tmp/o bash benchmarks/gpu/overhead.sh
set -uo pipefail
D=${1:-$(date -u +%F)}
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
step() { local limit=$1; shift; echo "=== [$(date -u +%T)] $*"; timeout -s INT "$limit" "$@"; echo "=== rc=$?"; }
if [ "${SMOKE:-0}" = 1 ]; then  # tiny CPU sizes: the scripts, their files and the summary, in seconds
  DEV=cpu,cpu,cpu,cpu; HW=cpu; CO="--max-bytes 1K --rounds 1 --round-ms 1"; SV="--sizes 1K --rounds 1 --round-ms 1"
  CT=; DC="--backend gloo --nproc 1 --max-bytes 1K --rounds 1"  # comm_vs_torch needs CUDA (torch.cuda.comm): skipped
else
  DEV=cuda:0,cuda:0,cuda:0,cuda:0; HW=h200x1; CO="--max-bytes 32M --rounds 24 --round-ms 5"; SV="--rounds 12 --round-ms 5"
  CT="--max-bytes 32M --host-max-bytes 32M --time-per-point 0.08 --iters 200 --budget-s 65"; DC="--backend nccl --rounds 18 --max-bytes 32M"
fi
{
  echo "# command: OUT=$OUT bash benchmarks/gpu/overhead.sh $D"; date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
  $PY -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available() and torch.cuda.nccl.version(), torch.cuda.device_count())"
} > "$OUT/env_${HW}_$D.txt" 2>&1
# shellcheck disable=SC2086  # the option strings split into arguments on purpose
{
step 85 $PY benchmarks/communicator_overhead.py --devices $DEV $CO --out "$OUT" --date "$D" \
    > "$OUT/communicator-overhead.log" 2>&1
step 35 $PY benchmarks/stack_vs_chain.py --devices $DEV $SV --out "$OUT" --date "$D" \
    > "$OUT/stack-vs-chain.log" 2>&1
[ -n "$CT" ] && step 85 $PY benchmarks/comm_vs_torch.py --devices $DEV $CT --out "$OUT" --date "$D" \
    > "$OUT/comm-vs-torch.log" 2>&1
step 70 $PY benchmarks/dist_call_overhead.py $DC --out "$OUT" > "$OUT/dist-call-overhead.log" 2>&1
}
{
  echo "# cells below target (plain < 0.97 or prepared < 1.0), $D"
  awk '$0 ~ /^#/ || ($1 !~ /^op/ && NF >= 7 && ($(NF-1) < 0.97 || $NF < 1.0))' "$OUT"/communicator-overhead_*"$D".txt
  [ -n "$CT" ] && awk '$0 ~ /^#/ || ($1 !~ /^op/ && NF >= 9 && $(NF-2) < 0.97)' "$OUT"/comm-vs-torch_*"$D".txt
  grep -E "worst cell|median over" "$OUT"/dist-call-overhead_*.txt
  echo "# stacked vs chained (> 1: the chain is faster)"
  cat "$OUT"/stack-vs-chain_*"$D".txt
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
