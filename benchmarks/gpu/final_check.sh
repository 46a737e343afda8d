#!/usr/bin/env bash
# Last check on the one-H200 machine after the per-call overhead work: GPU-relevant tests, the two per-call
# overhead scripts, dist_overhead at world size 1, and the one-process bench backends up to 1 MiB.
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"; R=$PWD/h200-F; rm -rf "$R"; mkdir -p "$R"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MPLBACKEND=Agg
timeout 110 python3 -m pytest -q -p no:cacheprovider --timeout=60 -rfE tests/comm tests/test_communicator.py tests/dist tests/bench/test_gpu.py 2>&1 | tail -n 8 | tee "$R/pytest.log"
timeout 35 python3 benchmarks/communicator_overhead.py --devices cuda:0,cuda:0,cuda:0,cuda:0 --calls 2000 --rounds 5 > "$R/communicator-overhead.txt" 2>&1; echo "comm overhead rc=$?"; tail -n 14 "$R/communicator-overhead.txt"
timeout 30 python3 benchmarks/dist_call_overhead.py --backend nccl --calls 2000 --rounds 5 > "$R/dist-call-overhead.txt" 2>&1; echo "dist call rc=$?"; tail -n 14 "$R/dist-call-overhead.txt"
timeout 30 python3 benchmarks/dist_overhead.py --nprocs 1 --backend nccl --out "$R/dist-overhead.md" > /dev/null 2>&1; echo "dist_overhead rc=$?"; grep -E "^At >=" "$R/dist-overhead.md"
timeout 40 python3 -m gpucomm bench --backends torch.cuda.comm,gpucomm.comm --ops broadcast,reduce,scatter,gather -e 1M --out "$R/bench-local" > "$R/bench.log" 2>&1; echo "bench rc=$?"
python3 - "$R" <<'PY'
import json, statistics as st, sys
b = [json.loads(l) for l in open(f"{sys.argv[1]}/bench-local/records.jsonl")][1:]
for op in dict.fromkeys(r["op"] for r in b):
    sp = [r["speedup"] for r in b if r["op"] == op and r["backend"] == "gpucomm.comm" and r["speedup"]]
    print(f"bench {op}: gpucomm.comm speedup vs torch.cuda.comm out=, 8 B-1 MiB: median {st.median(sp):.2f} min {min(sp):.2f}")
PY
rm -rf "$R/bench-local/plots"; tar -czf "$OUT/F.tar.gz" -C "$PWD" h200-F
