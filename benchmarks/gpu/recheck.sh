#!/usr/bin/env bash
# A last check on the one-H200 machine after the host-path changes: the comm, communicator and bench
# tests, benchmarks/comm_vs_torch.py, and the one-process backends of gpucomm bench.
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"; R=$PWD/h200-R; rm -rf "$R"; mkdir -p "$R"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MPLBACKEND=Agg
timeout 150 python3 -m pytest -q -p no:cacheprovider --timeout=120 -rfE tests/comm tests/docs tests/test_communicator.py tests/bench 2>&1 | tail -n 15 | tee "$R/pytest.log"
timeout 120 python3 benchmarks/comm_vs_torch.py --json "$R/comm_vs_torch.jsonl" > "$R/comm_vs_torch.txt" 2>&1; echo "comm_vs_torch rc=$?"
timeout 200 python3 -m gpucomm bench --backends torch.cuda.comm,gpucomm.comm --out "$R/bench-local" > "$R/bench.log" 2>&1; echo "bench rc=$?"; tail -n 4 "$R/bench.log"
python3 - "$R" <<'PY'
import json, sys, collections
R = sys.argv[1]
rows = [json.loads(l) for l in open(f"{R}/comm_vs_torch.jsonl")]
for op in dict.fromkeys(r["op"] for r in rows):
    rs = [r for r in rows if r["op"] == op]
    print(f"comm_vs_torch {op:22s} min {min(r['ratio'] for r in rs):.2f}  below 0.97: {[(r['size_bytes'], r['ratio']) for r in rs if r['ratio'] < 0.97]}")
b = [json.loads(l) for l in open(f"{R}/bench-local/records.jsonl")][1:]
for op in dict.fromkeys(r["op"] for r in b):
    sp = [(r["size"], r["speedup"]) for r in b if r["op"] == op and r["backend"] == "gpucomm.comm" and r["speedup"]]
    print(f"bench gpucomm.comm {op:15s} speedup min {min(s for _, s in sp):.2f} median {sorted(s for _, s in sp)[len(sp)//2]:.2f} below 0.97 at {[z for z, s in sp if s < 0.97]}")
PY
tar -czf "$OUT/R.tar.gz" -C "$PWD" h200-R
