"""Stacked against chained one-device reductions, plain and prepared, in one process, interleaved.

gpucomm reduces tensors that share one device by one of two strategies (``src/gpucomm/comm/_reduce.py``):
**stacked** (``torch.stack`` then one reduction: two kernels, (3n + 1) × size bytes) or **chained**
(``r = x0 + x1; r += x2; ...``: n - 1 kernels, 3(n - 1) × size bytes); all_reduce then copies the result
to the n - 1 other outputs either way.  Which one a plain call takes is a size limit (``REDUCE_STACK_MAX_BYTES``
for reduce, ``STACK_MAX_BYTES`` for reduce_scatter, ``ALL_REDUCE_STACK_MAX_BYTES`` for all_reduce, the size of one
input); a prepared call on CUDA between 2 and 32 MiB per input times both when it is prepared and keeps the faster
(``gpucomm.comm._reduce.times_routes``).  This script times both strategies on the same buffers at the sizes
around the limits, beside torch.cuda.comm's anchor (the one ``benchmarks/communicator_overhead.py`` uses) and the
prepared call that chose for itself, so a GPU run decides where the limits belong and shows the choice:

* **torch** — ``reduce_add(ts, d0)`` (reduce) and ``broadcast(reduce_add(ts, d0), out=ts)`` (all_reduce)
  on CUDA; the raw torch ops on CPU (host cost only).
* **plain stacked / plain chained** — ``LocalCommunicator.<op>(...)`` with the limit set above / below the
  call's stacked size (set before each call on every plain side, the same few Python operations each).
* **prepared stacked / prepared chained** — ``prepare(op, ...)`` under each limit with the timed choice off
  (the strategy is bound then), then ``p()``.
* **prepared timed** — ``prepare(op, ...)`` as shipped (timed where ``times_routes`` says), then ``p()``.

Rounds interleave the sides as in ``communicator_overhead.py`` (a balanced Latin square; same clock:
back-to-back calls between two device synchronisations; the median over ``--rounds``).  Ratios are stacked / chained time (above 1:
the chain is faster).  Writes ``stack-vs-chain_<hardware>_<date>.txt`` (with the command) to ``--out``
(default ``$OUT``, else ``benchmarks/results``) and prints it.

Usage::

    python benchmarks/stack_vs_chain.py                                   # CUDA: cuda:0 x4, 2/8/32 MiB
    python benchmarks/stack_vs_chain.py --devices cpu,cpu,cpu,cpu --sizes 1K,4K --rounds 3
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared clock beside this script

from _orders import cycle
from communicator_overhead import add_round_args, human, interleaved, parse_size, sides, start, sweep
from gpucomm.comm import _reduce
from gpucomm.communicator import LocalCommunicator

OPS = ("reduce", "all_reduce")
THEME = "stack-vs-chain"
STRATEGIES = {"stacked": 1 << 62, "chained": 0}
"""Each strategy's stacking limit (bytes): every call stacks, or none does."""


LIMITS = ("REDUCE_STACK_MAX_BYTES", "STACK_MAX_BYTES", "ALL_REDUCE_STACK_MAX_BYTES")


def set_limit(limit: int) -> None:
    for name in LIMITS:
        setattr(_reduce, name, limit)


def with_limit(fn: Callable[[], object], limit: int) -> Callable[[], object]:
    def call() -> object:
        set_limit(limit)
        return fn()

    return call


def measure(comm: LocalCommunicator, op: str, size: int, rounds: int, round_ms: float) -> dict:
    """Median µs per call of torch and the four gpucomm sides, for one op and size."""
    fns: dict[str, Callable[[], object]] = {}
    shipped = [getattr(_reduce, name) for name in LIMITS]
    try:
        _reduce.TIME_ROUTES = False
        for name, limit in STRATEGIES.items():
            set_limit(limit)
            built, nbytes = sides(comm, op, size)  # prepared binds its strategy here
            fns.setdefault("torch", built["torch"])
            fns[f"plain {name}"] = with_limit(built["plain"], limit)
            fns[f"prepared {name}"] = built["prepared"]
        _reduce.TIME_ROUTES = True
        for name, value in zip(LIMITS, shipped, strict=True):
            setattr(_reduce, name, value)
        fns["prepared timed"] = sides(comm, op, size)[0]["prepared"]  # as shipped: it chooses here
    finally:
        _reduce.TIME_ROUTES = True
    med, _ = interleaved(fns, comm.devices, rounds, round_ms)
    return {"op": op, "size_bytes": nbytes, **{k: round(v, 3) for k, v in med.items()}}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", help="comma list (default: one GPU: cuda:0 x4; no GPU: cpu x4)")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma list from {', '.join(OPS)}")
    p.add_argument("--sizes", default="2M,4M,8M,16M,32M", help="per-participant sizes (default 2M,4M,8M,16M,32M)")
    add_round_args(p, 2 * cycle(6), "the .txt")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    ops = [o for o in args.ops.split(",") if o]
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    except (ValueError, IndexError):
        sizes = []
    if not ops or any(o not in OPS for o in ops) or not sizes or min(sizes) < 1 or args.rounds < 1:
        print(f"stack_vs_chain: --ops must come from {list(OPS)}, --sizes must be sizes like 2M,8M, --rounds >= 1 "
              f"(got {args.ops!r}, {args.sizes!r}, {args.rounds})", file=sys.stderr)
        return 2
    comm, stem, command = start(args, argv, THEME)
    devs = comm.devices
    path = Path(f"{stem}.txt")
    limits = [getattr(_reduce, name) for name in LIMITS]
    lines = [f"# command: {command}",
             f"# stacked vs chained one-device reductions | torch {torch.__version__} | devices "
             f"{','.join(map(str, devs))}" + (f" | {torch.cuda.get_device_name(devs[0])}" if devs[0].type == "cuda"
                                            else " | CPU (anchor: raw torch ops; host cost only)"),
             f"# shipped limits (size of one input): reduce {human(limits[0])}, reduce_scatter {human(limits[1])}, "
             f"all_reduce {human(limits[2])}; prepared timed between {human(_reduce.TIMED_MIN_BYTES)} and "
             f"{human(_reduce.TIMED_MAX_BYTES)} (exclusive) on CUDA; median us per call; stk/chn = stacked / chained "
             "time (> 1: the chain is faster); timed x = torch / prepared timed (> 1: ours faster)",
             f"{'op':11s} {'size':>8s} {'torch us':>9s} {'plain stk':>10s} {'plain chn':>10s} {'prep stk':>9s} "
             f"{'prep chn':>9s} {'prep timed':>10s} {'plain stk/chn':>14s} {'prep stk/chn':>13s} {'timed x':>8s}"]
    for line in lines:
        print(line, flush=True)
    def cell(op: str, size: int) -> str:
        r = measure(comm, op, size, args.rounds, args.round_ms)
        return (f"{op:11s} {human(r['size_bytes']):>8s} {r['torch']:9.2f} {r['plain stacked']:10.2f} "
                f"{r['plain chained']:10.2f} {r['prepared stacked']:9.2f} {r['prepared chained']:9.2f} "
                f"{r['prepared timed']:10.2f} {r['plain stacked'] / r['plain chained']:14.3f} "
                f"{r['prepared stacked'] / r['prepared chained']:13.3f} {r['torch'] / r['prepared timed']:8.3f}")

    try:
        sweep(((op, size) for op in ops for size in sizes), cell, lines, devs)
    finally:
        for name, value in zip(LIMITS, limits, strict=True):
            setattr(_reduce, name, value)
        path.write_text("\n".join(lines) + "\n")
    print(f"# wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
