#!/usr/bin/env bash
# gpucomm.comm + the Communicator on one H200 (about 6-7 minutes): the GPU tests of both areas, then
# benchmarks/communicator_overhead.py (plain and prepared LocalCommunicator vs torch.cuda.comm out=,
# cuda:0 x4, 8 B - 256 MiB) and benchmarks/comm_vs_torch.py (gpucomm.comm vs torch.cuda.comm, every op,
# 8 B - 256 MiB, capped at 230 s).  Writes to $OUT:
#   tests-comm-communicator_h200x1_<date>.log, communicator-overhead_h200x1_<date>.txt/.jsonl,
#   comm-vs-torch_h200x1_<date>.txt/.jsonl
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"; D=$(date -u +%F)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE tests/comm tests/communicator \
    > "$OUT/tests-comm-communicator_h200x1_$D.log" 2>&1; echo "tests rc=$?"; tail -n 5 "$OUT/tests-comm-communicator_h200x1_$D.log"
timeout 200 python3 benchmarks/communicator_overhead.py --out "$OUT" --date "$D" > /dev/null 2>&1; echo "communicator_overhead rc=$?"
cat "$OUT/communicator-overhead_h200x1_$D.txt"
timeout 260 python3 benchmarks/comm_vs_torch.py --out "$OUT" --date "$D" --budget-s 230 > /dev/null 2>&1; echo "comm_vs_torch rc=$?"
awk '$0 ~ /^#/ || $(NF-2) < 0.97' "$OUT/comm-vs-torch_h200x1_$D.txt"   # header and every row below 0.97x
