#!/usr/bin/env bash
# Is the H100 profile gpucomm derives from the H200's right?  On a lent H100, `gpucomm measure --arch` at the
# shapes of the held-out H100 runs (benchmarks/published_holdout.jsonl: torchtitan's Llama 3.1 8B at 8,192
# tokens, LLM Foundry's MPT-7b at 8,192 and MPT-70b and MPT-30b at 2,048), each stopped by SIGTERM at its
# share of the call (it saves what it measured, marked interrupted).  benchmarks/derive_check.py then compares
# each point with what the derived h100-nvswitch profile prices at its shape, on CPU.
# Writes $OUT/run.tgz (w/: the profiles, their logs, nvidia-smi's view of the GPU, README.txt with each stage's
# exit status and time).
# Usage (device machine, repo root): OUT=... bash benchmarks/gpu/h100_check.sh [SECONDS]   (default 450)
set -uo pipefail
OUT=${OUT:-./gpu-out}; W=$OUT/w; mkdir -p "$W"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
total=${1:-450}; t0=$SECONDS
note() { echo "$* at $((SECONDS - t0)) s" | tee -a "$W/README.txt"; }
cat /proc/sys/kernel/random/boot_id > "$W/boot-id.txt"
nvidia-smi > "$W/nvidia-smi.txt" 2>&1
nvidia-smi -q -d CLOCK,POWER,PERFORMANCE >> "$W/nvidia-smi.txt" 2>&1
lscpu > "$W/lscpu.txt" 2>&1
MPT=ffn_kind=gelu-4h,vocab=50368
# name | arch | seq | share of the call (of 100)
RUNS=(
  "llama31-8b|layers=32,hidden=4096,heads=32,kv_heads=8,ffn=14336,ffn_kind=swiglu,vocab=128256|8192|27"
  "mpt-7b|layers=32,hidden=4096,heads=32,$MPT|8192|27"
  "mpt-70b|layers=80,hidden=8192,heads=64,$MPT|2048|24"
  "mpt-30b|layers=48,hidden=7168,heads=56,$MPT|2048|22"
)
for r in "${RUNS[@]}"; do
  IFS='|' read -r name arch seq share <<< "$r"
  left=$(( total - (SECONDS - t0) )); lim=$(( total * share / 100 )); [ "$lim" -gt "$left" ] && lim=$left
  [ "$lim" -lt 20 ] && { note "$name skipped (only $left s left)"; continue; }
  timeout -s TERM "$lim" python3 -m gpucomm measure --arch "$arch" --seq "$seq" --out "$W/h100-$name.json" \
      > "$W/measure-$name.log" 2>&1
  note "$name rc=$? limit $lim s ($(tail -n 2 "$W/measure-$name.log" | head -n 1))"
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv \
    >> "$W/nvidia-smi.txt" 2>&1
tar -C "$OUT" -czf "$OUT/run.tgz" w && rm -rf "$W"
