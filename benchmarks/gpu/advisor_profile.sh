#!/usr/bin/env bash
# The whole H200 compute profile in one machine's run, in two device calls back to back (the default grid and
# its busy pass take ~12 minutes, over one call's 10): the second call must find the first one's machine still
# warm, which each call checks by the kernel's boot id (boot-id.txt).
#
#   measure:  gpucomm measure --out w/h200.json, stopped by SIGTERM at 505 s (it saves what it measured, marked
#             interrupted), then benchmarks/host_pin.py (does pinning the process to one CPU steady a host-paced
#             step?) for 55 s;
#   complete PROFILE:  PROFILE (the first call's h200.json: build/advisor-profile/h200.json, which the first
#             call leaves on the machine, or a copy carried in the tree) becomes the shipped path and
#             gpucomm measure --merge completes it there (the points and busy times it lacks), then
#             advisor_single_gpu.py's thirteen cases and the five unseen shapes predict from it, as long as the
#             call's time allows.
# Writes $OUT/run.tgz (w/: the profile, the logs, the results with their .json sidecars, README.txt with each
# stage's exit status and time).
# Usage (device machine, repo root): OUT=... bash benchmarks/gpu/advisor_profile.sh measure|complete [PROFILE] DATE RUN
# HOST_PIN_S (default 55; 0 skips host_pin) and COMPLETE_S (default 570: the complete stage's end; the thirteen
# cases need 120 s of it left after the merge, the unseen shapes 60 s) fit the calls to the device time left;
# MEASURE_S (default 505) and MERGE_S (default 290) bound the two measuring runs (GPU=h100 runs no cases after it, so it may take the whole call).
set -uo pipefail
OUT=${OUT:-./gpu-out}; W=$OUT/w; mkdir -p "$W"
stage=$1; shift
if [ "$stage" = complete ]; then prof_in=$1; shift; fi
D=${1:-$(date -u +%F)}; R=${2:-r27}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
source "$(dirname "$0")/unseen_cases.sh"
# GPU=h100 measures a lent H100 instead (a check of the profile derived for it from the H200's): its profile is
# merged in w/ and the H200 cases, which price --hardware h200-nvswitch, are not run.
G=${GPU:-h200}
P=src/gpucomm/advisor/compute/data/h200.json
[ "$G" = h200 ] || P=$W/$G.json
t0=$SECONDS
note() { echo "$* at $((SECONDS - t0)) s" | tee -a "$W/README.txt"; }
cat /proc/sys/kernel/random/boot_id > "$W/boot-id.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > "$W/nvidia-smi.txt" 2>&1
case $stage in
  measure)
    lscpu > "$W/lscpu.txt" 2>&1
    timeout -s TERM "${MEASURE_S:-505}" python3 -m gpucomm measure --out "$W/$G.json" > "$W/measure.log" 2>&1
    note "measure rc=$? ($(tail -n 2 "$W/measure.log" | head -n 1))"
    # build/ is ignored, so the device keeps it between calls on one warm machine: the complete call reads the
    # profile from there without waiting for it to travel back and forth.
    mkdir -p build/advisor-profile && cp "$W/$G.json" build/advisor-profile/ 2>/dev/null
    pin_s=${HOST_PIN_S:-55}
    if [ "$pin_s" -gt 0 ]; then
      timeout -s INT $((pin_s + 15)) python3 benchmarks/host_pin.py --seconds "$pin_s" \
          --out "$W/host-pin_${G}x1_$D.txt" > "$W/host-pin.log" 2>&1
      note "host_pin rc=$?"
    else
      note "host_pin skipped (HOST_PIN_S=0)"
    fi
    ;;
  complete)
    [ -f "$prof_in" ] || { note "complete: $prof_in is not on this machine (another machine came?)"; \
        tar -C "$OUT" -czf "$OUT/run.tgz" w; exit 1; }
    [ "$prof_in" -ef "$P" ] || cp "$prof_in" "$P" || exit 1
    timeout -s TERM "${MERGE_S:-290}" python3 -m gpucomm measure --merge "$P" --out "$P" > "$W/merge.log" 2>&1
    note "merge rc=$? ($(tail -n 2 "$W/merge.log" | head -n 1))"
    [ "$G" = h200 ] || { tar -C "$OUT" -czf "$OUT/run.tgz" w && rm -rf "$W"; exit 0; }
    cp "$P" "$W/h200.json"
    left=$(( ${COMPLETE_S:-570} - (SECONDS - t0) ))
    if [ "$left" -gt 120 ]; then
      timeout $(( left < 175 ? left : 175 )) python3 benchmarks/advisor_single_gpu.py \
          --out "$W/advisor-single-gpu-${R}_h200x1_$D.txt" > "$W/single.log" 2>&1
      note "single rc=$?"
    else
      note "single skipped (only $left s left)"
    fi
    left=$(( ${COMPLETE_S:-570} - (SECONDS - t0) ))
    if [ "$left" -gt 60 ]; then
      timeout "$left" python3 benchmarks/advisor_single_gpu.py "${UNSEEN_CASES[@]}" \
          --out "$W/advisor-single-gpu-unseen-${R}_h200x1_$D.txt" > "$W/unseen.log" 2>&1
      note "unseen rc=$? (limit $left s)"
    else
      note "unseen skipped (only $left s left)"
    fi
    ;;
  *) echo "advisor_profile.sh: expected measure or complete, got $stage" >&2; exit 2 ;;
esac
tar -C "$OUT" -czf "$OUT/run.tgz" w && rm -rf "$W"
