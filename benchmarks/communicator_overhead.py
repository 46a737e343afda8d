"""Host (Python) cost per call of every :class:`gpucomm.LocalCommunicator` method, against raw torch.

Usage::

    python benchmarks/communicator_overhead.py                                  # CPU: cpu x4
    python benchmarks/communicator_overhead.py --devices cuda:0,cuda:0,cuda:0,cuda:0

Method: one process, tiny tensors (``--numel`` float32 elements per participant, default 2 = 8 B),
so every call is launch/enqueue-bound and the time measured is host time.  For each method three
sides are timed in rounds that alternate (ours, the floor, torch.cuda.comm where it has the op):

* **ours** — the Communicator method, in place, as ``gpucomm bench`` calls it;
* **floor** — the least raw-torch work the op must do on these tensors (e.g. ``torch.cat(ins,
  out=dst)`` for gather, ``torch.sum(torch.stack(ts), 0, out=...)`` plus copies for reduce, a
  ``copy_`` loop for broadcast), with no checks at all;
* **torch** — ``torch.cuda.comm``'s ``out=`` form (CUDA only: broadcast, reduce_add, scatter,
  gather; reduce is ``reduce_add`` into the root's tensor, so it also allocates).

Each round runs ``--calls`` calls back to back timed with ``time.perf_counter`` (CUDA: the device
is synchronised before and after a round, so a round's time is enqueue time plus any waiting the
calls themselves cause); the reported figure is the median over ``--rounds`` rounds, in µs per call.
On CPU the numbers are CPU numbers: they measure Python and dispatcher overhead, not a link.

``--profile METHOD`` prints a cProfile of ``--calls`` calls of one method instead.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Callable

import torch

import gpucomm
from gpucomm import LocalCommunicator

METHODS = ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter", "scatter", "gather",
           "all_to_all", "send_recv")


def _sides(comm: LocalCommunicator, numel: int) -> dict[str, dict[str, Callable[[], object]]]:
    """Per method: ``ours``, ``floor`` and (CUDA only) ``torch`` callables on fixed buffers."""
    devs = comm.devices
    n = len(devs)
    one = [torch.ones(numel, device=d) for d in devs]
    big = [torch.ones(numel * n, device=d) for d in devs]
    root_big = [torch.ones(numel * n, device=d) for d in devs]
    small = [torch.empty(numel, device=d) for d in devs]
    rest = one[1:]
    chunks = [list(b.chunk(n)) for b in big]
    out_chunks = [list(b.chunk(n)) for b in root_big]

    def floor_reduce():
        torch.sum(torch.stack(one), 0, out=one[0])

    def floor_all_reduce():
        torch.sum(torch.stack(one), 0, out=one[0])
        for t in rest:
            t.copy_(one[0])

    def floor_all_gather():
        for o in root_big:
            torch.cat(one, out=o)

    def floor_reduce_scatter():
        full = torch.sum(torch.stack(big), 0)
        for o, c in zip(small, full.chunk(n), strict=True):
            o.copy_(c)

    def floor_broadcast():
        for t in rest:
            t.copy_(one[0])

    def floor_scatter():
        for o, c in zip(small, big[0].chunk(n), strict=True):
            o.copy_(c)

    def floor_all_to_all():
        for i in range(n):
            for j in range(n):
                out_chunks[j][i].copy_(chunks[i][j])

    def floor_send_recv():
        for i in range(n):
            small[(i + 1) % n].copy_(one[i])

    sides = {
        "broadcast": {"ours": lambda: comm.broadcast(one, 0), "floor": floor_broadcast},
        "reduce": {"ours": lambda: comm.reduce(one, 0, "sum"), "floor": floor_reduce},
        "all_reduce": {"ours": lambda: comm.all_reduce(one, "sum"), "floor": floor_all_reduce},
        "all_gather": {"ours": lambda: comm.all_gather(root_big, one), "floor": floor_all_gather},
        "reduce_scatter": {"ours": lambda: comm.reduce_scatter(small, big, "sum"), "floor": floor_reduce_scatter},
        "scatter": {"ours": lambda: comm.scatter(small, big, 0), "floor": floor_scatter},
        "gather": {"ours": lambda: comm.gather(root_big, one, 0),
                   "floor": lambda: torch.cat(one, out=root_big[0])},
        "all_to_all": {"ours": lambda: comm.all_to_all(root_big, big), "floor": floor_all_to_all},
        "send_recv": {"ours": lambda: comm.send_recv(small, one), "floor": floor_send_recv},
    }
    if all(d.type == "cuda" for d in devs):
        import torch.cuda.comm as tcc

        sides["broadcast"]["torch"] = lambda: tcc.broadcast(one[0], out=rest)
        sides["reduce"]["torch"] = lambda: tcc.reduce_add(one, destination=devs[0])
        sides["scatter"]["torch"] = lambda: tcc.scatter(big[0], out=small)
        sides["gather"]["torch"] = lambda: tcc.gather(one, out=root_big[0])
    return sides


def _sync(devs: list[torch.device]) -> None:
    for d in dict.fromkeys(d for d in devs if d.type == "cuda"):
        torch.cuda.synchronize(d)


def _round(fn: Callable[[], object], calls: int, devs: list[torch.device]) -> float:
    _sync(devs)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync(devs)
    return (time.perf_counter() - t0) / calls * 1e6


def measure(comm: LocalCommunicator, numel: int, calls: int, rounds: int,
            methods: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Median µs per call of every side of every method, rounds alternating between the sides."""
    table = _sides(comm, numel)
    devs = comm.devices
    result = {}
    for name in methods:
        sides = table[name]
        for fn in sides.values():  # warm up: caches, allocator, lazy imports
            _round(fn, max(100, calls // 20), devs)
        samples: dict[str, list[float]] = {k: [] for k in sides}
        for r in range(rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for k in order:
                samples[k].append(_round(sides[k], calls, devs))
        result[name] = {k: statistics.median(v) for k, v in samples.items()}
    return result


def _print(result: dict[str, dict[str, float]], label: str) -> None:
    has_torch = any("torch" in r for r in result.values())
    head = f"{'method':<15} {'ours µs':>9} {'floor µs':>9} {'ours/floor':>10}"
    if has_torch:
        head += f" {'torch µs':>9} {'torch/ours':>10}"
    print(f"# {label}")
    print(head)
    for name, r in result.items():
        line = f"{name:<15} {r['ours']:>9.2f} {r['floor']:>9.2f} {r['ours'] / r['floor']:>10.2f}"
        if "torch" in r:
            line += f" {r['torch']:>9.2f} {r['torch'] / r['ours']:>10.2f}"
        print(line)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", default="cpu,cpu,cpu,cpu", help="comma-separated device list")
    p.add_argument("--numel", type=int, default=2, help="float32 elements per participant (2 = 8 bytes)")
    p.add_argument("--calls", type=int, default=20000, help="calls per timed round")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per side (median reported)")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of methods")
    p.add_argument("--profile", default=None, metavar="METHOD", help="cProfile one method instead")
    args = p.parse_args(argv)
    comm = LocalCommunicator(args.devices.split(","))
    if args.profile:
        fn = _sides(comm, args.numel)[args.profile]["ours"]
        _round(fn, 200, comm.devices)
        prof = cProfile.Profile()
        prof.runcall(_round, fn, args.calls, comm.devices)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return 0
    methods = tuple(m for m in args.methods.split(",") if m)
    result = measure(comm, args.numel, args.calls, args.rounds, methods)
    kind = "CPU" if all(d.type == "cpu" for d in comm.devices) else "CUDA"
    _print(result, f"{kind} host time per call, devices={args.devices}, {args.numel * 4} B per participant, "
                   f"{args.calls} calls x {args.rounds} rounds, torch {torch.__version__}, "
                   f"gpucomm at {gpucomm.__file__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
