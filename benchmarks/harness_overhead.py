"""Does ``gpucomm bench``'s harness change what it measures?  Our all_reduce timing vs a bare loop.

Both sides run in the same processes, on the same process group, at the same sizes, interleaved
round by round and counterbalanced (ours first in even rounds, last in odd ones), so drift and
position effects on a shared machine hit both alike:

* **ours** — :func:`gpucomm.bench.runner.measure` for the ``torch.distributed`` backend: warmup,
  rotating buffer sets, per-iteration timing (CUDA events on NCCL, perf_counter + sync on gloo),
  MAX over ranks per iteration, median.  The exact check runs after timing and is not timed.
* **bare** — the loop people write by hand: one tensor, warmup, barrier, then per iteration
  ``t0; td.all_reduce(t); sync; t1`` (CUDA events around the call on NCCL), the same MAX over
  ranks, median.

The ratio ours/bare is printed per size (the median of per-round ratios); the target is within 3% at
>= 1 MiB.  On a shared, overloaded CPU machine scheduling noise dwarfs any harness cost: the load
average is printed with the result so a reader can judge.

Usage::

    python benchmarks/harness_overhead.py                      # gloo, 2 CPU processes
    python benchmarks/harness_overhead.py --nproc 8            # NCCL, one process per GPU
    python benchmarks/harness_overhead.py --out benchmarks/results/harness-overhead_cpu-gloo_2026-12-02.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

_CPU_SIZES = ["64K", "1M", "4M", "16M"]
_GPU_SIZES = ["64K", "1M", "16M", "256M", "1G"]


def _bare(ts: list[torch.Tensor], iters: int, warmup: int) -> list[float]:
    """The hand-written loop: per-iteration time of ``td.all_reduce`` on ``ts[i % len(ts)]``."""
    import torch.distributed as td

    k = len(ts)
    cuda = ts[0].device.type == "cuda"
    for i in range(warmup):
        td.all_reduce(ts[i % k])
    if cuda:
        torch.cuda.synchronize(ts[0].device)
    td.barrier()
    times = []
    if cuda:
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for i, (s, e) in enumerate(pairs):
            s.record()
            td.all_reduce(ts[i % k])
            e.record()
        torch.cuda.synchronize(ts[0].device)
        times = [s.elapsed_time(e) / 1e3 for s, e in pairs]
    else:
        for i in range(iters):
            t0 = time.perf_counter()
            td.all_reduce(ts[i % k])
            times.append(time.perf_counter() - t0)
    return times


def _one_size(size: int, backend, cfg, combine, iters: int, warmup: int, rounds: int) -> dict:
    """Interleaved, counterbalanced rounds of ours vs the bare loops at one size."""
    from gpucomm.bench.buffers import IN_PLACE, plan_case
    from gpucomm.bench.metrics import median
    from gpucomm.bench.runner import ROTATE_BYTES, measure
    from gpucomm.collectives import CollectiveName, ReduceOp

    device = backend.devices[0]
    case = plan_case(CollectiveName.ALL_REDUCE, size, backend.n, torch.float32, ReduceOp.SUM, IN_PLACE)
    sets = max(1, min(8, -(-ROTATE_BYTES[device.type] // case.size)))  # what measure() rotates through
    one = [torch.ones(case.count, dtype=torch.float32, device=device)]
    many = [torch.ones(case.count, dtype=torch.float32, device=device) for _ in range(sets)]
    out = {"ours": [], "bare": [], "bare_rot": [], "sets": sets, "wrong": 0}
    for r in range(rounds):  # ours first in even rounds, last in odd ones
        for side in ("ours", "bare") if r % 2 == 0 else ("bare", "ours"):
            if side == "ours":
                record = measure(backend, case, cfg, combine)
                out["ours"].append(record.time_us_median)
                out["wrong"] += record.wrong
            else:
                out["bare"].append(median(combine(_bare(one, iters, warmup), 0)[0]) * 1e6)
                out["bare_rot"].append(median(combine(_bare(many, iters, warmup), 0)[0]) * 1e6)
    return out


def _worker(sizes: list[int], iters: int, warmup: int, rounds: int) -> dict | None:
    import torch.distributed as td

    from gpucomm.bench.backends import TorchDistributed
    from gpucomm.bench.config import BenchConfig
    from gpucomm.bench.pg import _combine
    from gpucomm.collectives import CollectiveName, ReduceOp
    from gpucomm.dist import device as dist_device

    device = dist_device()
    backend = TorchDistributed(device)
    cfg = BenchConfig(ops=(CollectiveName.ALL_REDUCE,), backends=("torch.distributed",), sizes=tuple(sizes),
                      dtypes=(torch.float32,), reduce_ops=(ReduceOp.SUM,), iters=iters, warmup=warmup, check=1,
                      device_type=device.type, nproc=td.get_world_size())
    combine = _combine(device)
    results = {size: _one_size(size, backend, cfg, combine, iters, warmup, rounds) for size in sizes}
    return results if td.get_rank() == 0 else None


def _table(results: dict, nproc: int, backend: str) -> str:
    from gpucomm.bench.sizes import format_size

    lines = ["| size | ours (µs) | bare, one buffer (µs) | bare, rotating (µs) | **ours / bare** | "
             "per-round ours/bare (min–max) | best round ours / best bare | ours / bare rotating | buffer sets | #wrong |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for size, r in results.items():
        ours, bare, rot = (statistics.median(r[k]) for k in ("ours", "bare", "bare_rot"))
        ratios = [o / b for o, b in zip(r["ours"], r["bare"], strict=True)]  # paired: same round
        rot_ratios = [o / b for o, b in zip(r["ours"], r["bare_rot"], strict=True)]
        lines.append(f"| {format_size(size)} | {ours:,.1f} | {bare:,.1f} | {rot:,.1f} | "
                     f"**{statistics.median(ratios):.3f}** | {min(ratios):.3f}–{max(ratios):.3f} | "
                     f"{min(r['ours']) / min(r['bare']):.3f} | "
                     f"{statistics.median(rot_ratios):.3f} | {r['sets']} | {r['wrong']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from gpucomm.bench.sizes import parse_size
    from gpucomm.devices import cuda_device_count
    from gpucomm.dist import launch

    gpus = cuda_device_count()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=gpus if gpus else 2)
    p.add_argument("--sizes", default=",".join(_GPU_SIZES if gpus else _CPU_SIZES))
    p.add_argument("-n", "--iters", type=int, default=50 if gpus else 10)
    p.add_argument("-w", "--warmup-iters", type=int, default=5 if gpus else 2)
    p.add_argument("--rounds", type=int, default=9 if gpus else 15)
    p.add_argument("--out", help="also write the result as Markdown to this file")
    args = p.parse_args(argv)
    sizes = [parse_size(s, "--sizes") for s in args.sizes.split(",")]
    backend = "nccl" if gpus >= args.nproc and gpus > 0 else "gloo"
    load0 = os.getloadavg()[0]
    started = time.perf_counter()
    results = launch(_worker, args.nproc, sizes, args.iters, args.warmup_iters, args.rounds, backend=backend)[0]
    elapsed = time.perf_counter() - started
    kind = "CPU numbers (gloo)" if backend == "gloo" else "GPU numbers (NCCL)"
    head = [
        f"# Harness overhead: `gpucomm bench` all_reduce timing vs a bare torch.distributed loop ({kind})",
        "",
        f"- date: {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}",
        f"- command: `python {' '.join(sys.argv)}`",
        f"- backend: {backend}, {args.nproc} processes, float32 sum, in-place; "
        f"{args.iters} timed iterations and {args.warmup_iters} warmups per measurement, "
        f"{args.rounds} interleaved rounds per size (median over rounds)",
        f"- torch {torch.__version__}, Python {platform.python_version()}, {platform.platform()}, "
        f"{os.cpu_count()} CPUs" + (f", {torch.cuda.get_device_name(0)}" if gpus else ""),
        f"- wall time: {elapsed:.1f} s; load average before/after: {load0:.1f} / {os.getloadavg()[0]:.1f} "
        f"(on {os.cpu_count()} CPUs)",
        "",
        "Times are medians over rounds of each round's median.  Ratios are paired: each round's ours / bare,",
        "then the median over rounds (1.000 = no difference; target within 3% at >= 1 MiB).  \"Best round\"",
        "compares the fastest round of each side, the least disturbed by other load (as timeit does).",
        "\"bare, rotating\" is the bare loop cycling through as many buffers as ours does (our harness rotates",
        "buffers so caches do not flatter small sizes): ours / bare rotating isolates the harness's own cost,",
        "bare rotating / bare one buffer is the cache effect the rotation removes.",
        "",
        "",
    ]
    text = "\n".join(head) + _table(results, args.nproc, backend) + "\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
