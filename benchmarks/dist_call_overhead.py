"""Per-call Python overhead of gpucomm.dist and ProcessGroupCommunicator over raw torch.distributed.

Usage::

    python benchmarks/dist_call_overhead.py                      # gloo on CPU, world of one, in-process
    python benchmarks/dist_call_overhead.py --backend nccl       # one GPU, world of one, in-process
    python benchmarks/dist_call_overhead.py --profile all_reduce # cProfile of the gpucomm sides

Method: :func:`gpucomm.dist.init` starts a world of one in this process.  For every collective the
three sides — raw ``torch.distributed``, ``gpucomm.dist``'s function and the
:class:`gpucomm.ProcessGroupCommunicator` method — run on 8-byte tensors in ``--rounds`` rounds of
``--calls`` back-to-back calls each (on CUDA followed by one device synchronise); inside a round the
sides run in an order that rotates every round, so drift hits all sides alike.  The table gives the
median over rounds of microseconds per call, and the median over rounds of the paired differences
and ratios to raw.  ``extra`` is the Python each layer adds per call.

At 8 bytes in a world of one the collective itself is as cheap as it gets (gloo: a local copy;
NCCL: a kernel launch), so the difference is the wrapper's cost and nothing else.
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import statistics
import sys
import time

import torch
import torch.distributed as td

import gpucomm.dist as gd
from gpucomm import ProcessGroupCommunicator

COLLECTIVES = ("all_reduce", "all_reduce_avg", "reduce", "broadcast", "all_gather", "reduce_scatter",
               "scatter", "gather", "all_to_all")
_raw_all_gather = getattr(td, "all_gather_single", None) or td.all_gather_into_tensor
_raw_reduce_scatter = getattr(td, "reduce_scatter_single", None) or td.reduce_scatter_tensor


def _sides(name: str, device: torch.device, nccl: bool):
    """(raw, gpucomm.dist, Communicator) callables running ``name`` once on 8-byte tensors."""
    a, b = torch.ones(2, device=device), torch.ones(2, device=device)
    comm = ProcessGroupCommunicator()
    ta, tb = [a], [b]
    avg = td.ReduceOp.AVG if nccl else None

    def raw_avg():  # what op="avg" is: native AVG on NCCL, sum + divide elsewhere
        if avg is not None:
            td.all_reduce(a, avg)
        else:
            td.all_reduce(a)
            a.div_(1)

    table = {
        "all_reduce": (lambda: td.all_reduce(a), lambda: gd.all_reduce(a, "sum"),
                       lambda: comm.all_reduce(ta, "sum")),
        "all_reduce_avg": (raw_avg, lambda: gd.all_reduce(a, "avg"), lambda: comm.all_reduce(ta, "avg")),
        "reduce": (lambda: td.reduce(a, 0), lambda: gd.reduce(a, 0, "sum"), lambda: comm.reduce(ta, 0, "sum")),
        "broadcast": (lambda: td.broadcast(a, 0), lambda: gd.broadcast(a, 0), lambda: comm.broadcast(ta, 0)),
        "all_gather": (lambda: _raw_all_gather(a, b), lambda: gd.all_gather_into_tensor(a, b),
                       lambda: comm.all_gather(ta, tb)),
        "reduce_scatter": (lambda: _raw_reduce_scatter(a, b), lambda: gd.reduce_scatter_tensor(a, b),
                           lambda: comm.reduce_scatter(ta, tb)),
        "scatter": (lambda: td.scatter(a, [b], 0), lambda: gd.scatter(a, [b], 0),
                    lambda: comm.scatter(ta, tb, 0)),
        "gather": (lambda: td.gather(a, [b], 0), lambda: gd.gather(a, [b], 0), lambda: comm.gather(tb, ta, 0)),
        "all_to_all": (lambda: td.all_to_all_single(a, b), lambda: gd.all_to_all_single(a, b),
                       lambda: comm.all_to_all(ta, tb)),
    }
    return table[name]


def _loop(fn, calls: int, device: torch.device) -> float:
    """Microseconds per call of ``calls`` back-to-back calls of ``fn``."""
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    if sync:
        sync(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    if sync:
        sync(device)
    return (time.perf_counter() - start) / calls * 1e6


def _measure(name: str, calls: int, rounds: int, device: torch.device, nccl: bool) -> tuple:
    sides = _sides(name, device, nccl)
    for fn in sides:  # warmup, untimed
        _loop(fn, max(100, calls // 20), device)
    times: list[list[float]] = [[], [], []]
    for r in range(rounds):
        for k in range(3):
            side = (r + k) % 3
            times[side].append(_loop(sides[side], calls, device))
    med = [statistics.median(t) for t in times]
    extra = [statistics.median(x - y for x, y in zip(times[s], times[0], strict=True)) for s in (1, 2)]
    ratio = [statistics.median(x / y for x, y in zip(times[s], times[0], strict=True)) for s in (1, 2)]
    return (*med, *extra, *ratio)


def _profile(name: str, calls: int, device: torch.device, nccl: bool) -> None:
    _, ours, comm = _sides(name, device, nccl)
    for label, fn in (("gpucomm.dist", ours), ("Communicator", comm)):
        prof = cProfile.Profile()
        prof.enable()
        _loop(fn, calls, device)
        prof.disable()
        print(f"\n--- cProfile: {label}.{name}, {calls} calls ---")
        pstats.Stats(prof).sort_stats("tottime").print_stats(14)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="gloo", help="gloo (CPU) or nccl (one GPU); default gloo")
    parser.add_argument("--calls", type=int, default=20000, help="calls per side per round (default 20000)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES), help="comma-separated subset")
    parser.add_argument("--profile", default=None, metavar="NAME", help="cProfile NAME's gpucomm sides instead")
    args = parser.parse_args(argv)
    names = args.collectives.split(",")
    unknown = sorted(set(names) - set(COLLECTIVES))
    if unknown:
        parser.error(f"--collectives: unknown {unknown}; choose from {list(COLLECTIVES)}")
    with gd.init(backend=args.backend) as pg:
        nccl = pg.backend == "nccl"
        where = torch.cuda.get_device_name(pg.device) if nccl else f"CPU ({platform.processor() or 'cpu'})"
        if args.profile:
            _profile(args.profile, args.calls, pg.device, nccl)
            return 0
        print(f"# per-call overhead, {pg.backend} on {where}, world size 1, in-process; 8-byte tensors")
        print(f"# torch {torch.__version__}, Python {platform.python_version()}; {args.rounds} rounds x "
              f"{args.calls} calls per side, interleaved; median over rounds"
              + ("; these are CPU numbers" if not nccl else ""))
        print("| collective | raw torch (us) | gpucomm.dist (us) | extra (us) | ratio "
              "| Communicator (us) | extra (us) | ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name in names:
            raw, ours, comm, x_ours, x_comm, r_ours, r_comm = _measure(name, args.calls, args.rounds,
                                                                       pg.device, nccl)
            print(f"| {name} | {raw:.2f} | {ours:.2f} | {x_ours:+.2f} | {r_ours:.3f} | {comm:.2f} | "
                  f"{x_comm:+.2f} | {r_comm:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
