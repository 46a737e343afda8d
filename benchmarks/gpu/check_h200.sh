#!/usr/bin/env bash
# One call on the GPU machine: the whole test suite with the GPU visible, then quick performance probes.
# Usage (device machine, repo root): bash benchmarks/gpu/check_h200.sh [quick|full]
# Writes logs and JSON under $OUT (default ./gpu-out). NVLink multicast switches are left as the machine sets them.
set -uo pipefail
mode=${1:-quick}
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MPLBACKEND=Agg
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
  python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())"
} 2>&1 | tee "$OUT/env.txt"
t0=$(date +%s)
timeout ${TEST_TIMEOUT:-330} python3 -m pytest -q -p no:cacheprovider --timeout=150 -rfEs ${PYTEST_ARGS:-} 2>&1 | tail -n 150 > "$OUT/pytest.log"
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s"; tail -n 40 "$OUT/pytest.log"
if [ "$mode" = quick ]; then
  timeout 150 python3 benchmarks/comm_vs_torch.py --max-bytes 64M --host-max-bytes 64M --factor 16 \
      --time-per-point 0.05 --json "$OUT/comm_vs_torch_quick.jsonl" 2>&1 | tail -n 80
fi
