#!/usr/bin/env bash
# The test suite on the GPU machine, in stages that each print where their time goes (--durations=25).
#
# Usage (device machine, repo root; plain pytest, no plugins to install):
#   bash benchmarks/gpu/tests.sh          # the GPU suite: every requires_gpus test (stage gpu, then gpu-slow)
#   bash benchmarks/gpu/tests.sh all      # the whole suite, CPU and GPU tests, in one call (fast, then slow)
#
# Stages: the tests marked `slow` (multi-process gloo worlds, CLI runs end to end, docs examples as
# scripts: a few seconds each) run in a stage of their own after the others, so the first stage says
# quickly whether anything is broken and each stage's --durations shows what it spends.  CI runs all of
# them in one `python -m pytest`; nothing here skips a test that CI runs.
#
# Writes $OUT/tests-<stage>.log for every stage (pytest's full output, durations at the end) and
# $OUT/tests-summary.txt (one line per stage: its exit status and wall time).  Expected on one H200
# (16 cores): the GPU suite about 1.5 minutes (82 tests took 70 s on 2026-12-03); the whole suite about
# 5-6 minutes (320 s on 2026-12-03 in one stage), under the 10-minute limit of one device call.  On the
# 2-core CPU machine (2026-12-04, no GPU): "not slow" 1,661 tests in 70 s, "slow" 60 tests in 248 s.
set -uo pipefail
mode=${1:-gpu}
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MPLBACKEND=Agg
summary="$OUT/tests-summary.txt"; : > "$summary"
stage() {  # stage NAME SECONDS MARK-EXPRESSION
  local name=$1 limit=$2 mark=$3 t0 rc
  t0=$(date +%s)
  timeout -s INT "$limit" python3 -m pytest -q -p no:cacheprovider -rfEs --durations=25 -m "$mark" tests \
      > "$OUT/tests-$name.log" 2>&1
  rc=$?
  [ "$rc" = 5 ] && rc=0  # no test has that mark (e.g. no slow GPU test): nothing to run is not a failure
  echo "$name: rc=$rc in $(( $(date +%s) - t0 )) s (-m \"$mark\")" | tee -a "$summary"
  tail -n 4 "$OUT/tests-$name.log"
}
python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.cuda.device_count(), 'GPU(s)')" \
    | tee -a "$summary"
case $mode in
gpu)
  stage gpu 170 "requires_gpus and not slow"
  stage gpu-slow 170 "requires_gpus and slow"
  ;;
all)
  stage fast 240 "not slow"
  stage slow 340 "slow"
  ;;
*)
  echo "usage: bash benchmarks/gpu/tests.sh [gpu|all]" >&2
  exit 2
  ;;
esac
! grep -q "rc=[1-9]" "$summary"
