"""What gpucomm.dist and ProcessGroupCommunicator cost on top of raw torch.distributed, measured in one run.

Usage::

    python benchmarks/dist_overhead.py                       # 2 ranks, gloo on CPU (NCCL where GPUs exist)
    python benchmarks/dist_overhead.py --nprocs 8 --backend nccl --out benchmarks/results/x.md

Method: ``gpucomm.dist.launch`` starts the ranks.  For every collective and message size (8 B to
64 MiB, ×8 steps) each iteration times four sides back to back — raw ``torch.distributed``,
``gpucomm.dist``'s function, the :class:`gpucomm.ProcessGroupCommunicator` method, and the raw call
again (an A/A control whose ratio to raw is the run's noise floor) — in an order that rotates
every iteration, so drift (other load on the machine, caches, frequency) hits all sides alike.  Every timed call is preceded by a barrier and followed (on CUDA) by a device
synchronise; its time is the slowest rank's.  Warmup iterations are not timed.  The table gives
median times in microseconds and, per side, the median over iterations of the paired ratio
ours / raw (1.00 = no overhead).

The target is a ratio <= 1.03 at >= 1 MiB.  At small sizes the ratio measures Python-level
argument checking against a collective that itself takes tens of microseconds on CPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
import time

import torch
import torch.distributed as td

import gpucomm
import gpucomm.dist as gd
from gpucomm import ProcessGroupCommunicator

SIZES = [8 * 8**k for k in range(8)] + [64 * 2**20]  # 8 B .. 16 MiB by x8, then 64 MiB
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
_raw_all_gather = getattr(td, "all_gather_single", None) or td.all_gather_into_tensor
_raw_reduce_scatter = getattr(td, "reduce_scatter_single", None) or td.reduce_scatter_tensor


def _iters(nbytes: int, scale: float) -> int:
    base = 40 if nbytes <= 256 * 1024 else 20 if nbytes <= 4 * 2**20 else 10 if nbytes <= 16 * 2**20 else 7
    return max(3, int(base * scale))


def _sides(name: str, nbytes: int, n: int, device: torch.device):
    """Three callables (raw, gpucomm.dist, Communicator) running ``name`` on buffers of ``nbytes``."""
    numel = max(n, nbytes // 4 // n * n)
    big, small = torch.ones(numel, device=device), torch.ones(numel // n, device=device)
    out_big = torch.empty_like(big)
    comm = ProcessGroupCommunicator()
    table = {  # raw, gpucomm.dist, Communicator; the raw call again is added as the A/A control
        "all_reduce": (lambda: td.all_reduce(big), lambda: gd.all_reduce(big, "sum"),
                       lambda: comm.all_reduce([big], "sum")),
        "all_gather": (lambda: _raw_all_gather(out_big, small), lambda: gd.all_gather_into_tensor(out_big, small),
                       lambda: comm.all_gather([out_big], [small])),
        "reduce_scatter": (lambda: _raw_reduce_scatter(small, big), lambda: gd.reduce_scatter_tensor(small, big),
                           lambda: comm.reduce_scatter([small], [big])),
        "broadcast": (lambda: td.broadcast(big, 0), lambda: gd.broadcast(big, 0), lambda: comm.broadcast([big], 0)),
        "all_to_all": (lambda: td.all_to_all_single(out_big, big), lambda: gd.all_to_all_single(out_big, big),
                       lambda: comm.all_to_all([out_big], [big])),
    }
    raw_side, ours_side, comm_side = table[name]
    return raw_side, ours_side, comm_side, raw_side


def _timed(fn, device: torch.device) -> float:
    gd.barrier()  # on NCCL it passes this rank's device, as torch asks
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def _measure(name: str, nbytes: int, scale: float, warmup: int) -> list[float]:
    n, device = gd.get_world_size(), gd.device()
    sides = _sides(name, nbytes, n, device)
    for _ in range(warmup):
        for fn in sides:
            fn()
    iters = _iters(nbytes, scale)
    times = torch.zeros(len(sides), iters, dtype=torch.float64)
    for i in range(iters):
        for k in range(len(sides)):
            side = (i + k) % len(sides)  # rotate the order so that no side always runs first
            times[side, i] = _timed(sides[side], device)
    slowest = times.to(device)
    td.all_reduce(slowest, td.ReduceOp.MAX)  # a collective's time is its slowest rank's
    slowest = slowest.cpu()
    medians = [statistics.median(row) * 1e6 for row in slowest.tolist()]
    # paired ratios: each iteration's sides ran back to back, so their ratio cancels slow drift
    paired = [statistics.median((slowest[k] / slowest[0]).tolist()) for k in (1, 2, 3)]
    return medians[:3] + paired


def _sweep(scale: float, warmup: int, sizes: list[int], names: list[str]) -> list[tuple]:
    rows = []
    for name in names:
        for nbytes in sizes:
            raw, ours, comm, r_ours, r_comm, r_aa = _measure(name, nbytes, scale, warmup)
            rows.append((name, nbytes, raw, ours, comm, r_ours, r_comm, r_aa, _iters(nbytes, scale)))
    return rows if gd.get_rank() == 0 else []


def _size(nbytes: int) -> str:
    for unit, div in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= div:
            return f"{nbytes // div} {unit}"
    return f"{nbytes} B"


def _table(rows: list[tuple], backend: str, nprocs: int, device: str, seconds: float) -> str:
    lines = [
        f"# gpucomm.dist overhead vs raw torch.distributed — {backend} on {device}, {nprocs} ranks",
        "",
        f"- date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; host: {platform.node()} "
        f"({platform.machine()}, {torch.get_num_threads()} torch threads per rank)",
        f"- versions: gpucomm {gpucomm.__version__}, torch {torch.__version__}, Python {platform.python_version()}",
        f"- command: `{' '.join(sys.argv)}`; wall time {seconds:.0f} s",
        "- method: sides interleaved per iteration (rotating order), barrier before each timed call, "
        "slowest rank's time, median over the iterations; warmup untimed",
        "- ratio = median over iterations of (ours / raw) for the two calls made back to back in that iteration",
        f"- these are {'CPU' if device == 'cpu' else 'GPU'} numbers" + (
            " (gloo over loopback; the machine was shared with other jobs)" if device == "cpu" else ""),
        "",
        "- A/A = the raw call timed again as a fourth side: its ratio to raw is the noise floor of this run",
        "",
        "| collective | size | iters | raw torch (us) | gpucomm.dist (us) | ratio | Communicator (us) | ratio "
        "| A/A ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, nbytes, raw, ours, comm, r_ours, r_comm, r_aa, iters in rows:
        lines.append(f"| {name} | {_size(nbytes)} | {iters} | {raw:.1f} | {ours:.1f} | {r_ours:.3f} | "
                     f"{comm:.1f} | {r_comm:.3f} | {r_aa:.3f} |")
    big = [r for r in rows if r[1] >= 2**20]
    if big:
        worst_d = max(r[5] for r in big)
        worst_c = max(r[6] for r in big)
        med_d = statistics.median(r[5] for r in big)
        med_c = statistics.median(r[6] for r in big)
        aa = [r[7] for r in big]
        lines += ["", f"At >= 1 MiB: gpucomm.dist median ratio {med_d:.3f} (worst {worst_d:.3f}); "
                      f"Communicator median {med_c:.3f} (worst {worst_c:.3f}); target <= 1.03.  "
                      f"A/A control: median {statistics.median(aa):.3f}, range {min(aa):.3f}-{max(aa):.3f}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("--backend", default=None, help="nccl or gloo (default: nccl if a GPU per rank)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply iteration counts (default 1)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed iterations per side (default 2)")
    parser.add_argument("--max-bytes", type=int, default=SIZES[-1], help="largest message (default 64 MiB)")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES), help="comma-separated subset")
    parser.add_argument("--out", default=None, help="also write the Markdown table here")
    args = parser.parse_args(argv)
    sizes = [s for s in SIZES if s <= args.max_bytes]
    start = time.perf_counter()
    results = gd.launch(_sweep, args.nprocs, args.scale, args.warmup, sizes, args.collectives.split(","),
                        backend=args.backend, timeout=1800)
    backend = args.backend or ("nccl" if torch.cuda.device_count() >= args.nprocs else "gloo")
    device = "cpu" if backend != "nccl" else torch.cuda.get_device_name(0)
    text = _table(results[0], backend, args.nprocs, device, time.perf_counter() - start)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
