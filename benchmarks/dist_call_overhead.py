"""What gpucomm.dist costs over raw torch.distributed: plain calls and prepared ones, every op, 8 B – 256 MiB.

Usage::

    python benchmarks/dist_call_overhead.py --nproc 2 --max-bytes 4M          # gloo on CPU, world 2
    PYTHONPATH=src python benchmarks/dist_call_overhead.py --backend nccl      # one GPU, world 1 (<= 2 min)
    python benchmarks/dist_call_overhead.py --nproc 1 -e 256K                  # gloo, world 1: host time

Method.  Three sides run the same collective on the same buffers (one set per cell, shared by
the sides), each as a zero-argument callable built before timing:

* **raw**: ``functools.partial`` of the torch.distributed function with positional arguments and
  torch's ``ReduceOp`` (``partial(td.all_reduce, a, td.ReduceOp.SUM)``, ``partial(td.reduce, a, 0,
  td.ReduceOp.SUM)``, ``partial(td.broadcast, a, 0)``, ...; group and async_op left at their
  defaults) — the cheapest way a user can call torch;
* **plain**: ``functools.partial`` of the :mod:`gpucomm.dist` function with a str op
  (``partial(gd.all_reduce, a, "sum")``): each call checks, maps the op and calls torch;
* **prepared**: the callable ``gd.prepare("all_reduce", a, "sum")`` returned (checked once; for
  most ops it is the very ``partial`` the raw side is, built by gpucomm).  For each op and size the
sides run in ``--rounds`` rounds of a block of back-to-back calls; inside a round the sides run in the
order of a balanced Latin square (``benchmarks/_orders.py``: over 6 rounds each side follows every other
equally often, so drift, warm caches and what one block leaves the next hit all three alike; until
2026-12-04's dist-call-overhead-r2 the order rotated, so each side always followed the same other one, and the
prepared side, for most ops the raw side's very ``partial``, read 0.945-1.036 of it).  Before the timed
rounds every side runs one untimed block.  Defaults (24 rounds, 40-400 calls a block) keep the NCCL run on
one H200 under 2 minutes; at 7 rounds of 5-16 calls (the first H200 run) a cell's median moved by ±3%
between neighbouring sizes with identical code, more than the 3% the target allows.

* **host µs/call**: ``time.perf_counter()`` around the block of calls, divided by the calls.  Nothing
  is added inside the block (no sync, no event, no allocation), so this is the time to *issue* a
  call — what the wrapper adds.  On gloo the calls are synchronous, so host time is the whole time.
* **device µs/call** (CUDA only): one CUDA event before the block and one after it, read after a
  synchronise that follows the block: the time the GPU spent on the block, divided by the calls.
* ratios are raw's time over the side's (>= 1: the side is as fast as raw), median over rounds of
  the per-round ratios; ``+µs`` is the median paired difference of host time.

Targets (issue 10): prepared >= 0.97x raw at every size; plain adds <= 2 µs of host time.

A world of one on NCCL makes the collective as cheap as it gets (a local copy kernel, or nothing),
so the difference is the wrapper's cost and nothing else.

Raw sides do the same job as ours: ``all_reduce_avg`` is torch's ``AVG`` on NCCL and a sum plus a
division elsewhere; ``reduce`` on gloo reduces a copy on the non-destination ranks, because gloo
writes partial sums into their input (gpucomm.dist keeps it; a probe on the 2-core CPU machine,
world 2, 256 KiB, showed torch's own reduce as slow as ours once its input is a fresh or rewritten
buffer, so comparing against the clobbering call would time something else).  ``send_recv`` in a world of one is a
copy in gpucomm.dist (torch has no self-send); its raw side is that same ``copy_``.

The results file (``dist-call-overhead_<hardware>_<date>.txt`` under ``--out``, default ``$OUT`` or
``benchmarks/results``) starts with the command that produced it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import os
import platform
import shlex
import statistics
import sys
import time

import torch
import torch.distributed as td

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the benchmarks' shared helpers beside this script

import gpucomm.dist as gd
from _orders import cycle, order

OPS = ("all_reduce", "all_reduce_avg", "reduce", "broadcast", "all_gather", "reduce_scatter", "scatter",
       "gather", "all_to_all", "send_recv")
_raw_all_gather = getattr(td, "all_gather_single", None) or td.all_gather_into_tensor
_raw_reduce_scatter = getattr(td, "reduce_scatter_single", None) or td.reduce_scatter_tensor
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``"8"``, ``"4K"``, ``"256M"`` -> bytes (powers of two, as nccl-tests' -b/-e)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = _UNITS.get(t[-1:], 1)
    value = int(t[:-1] if t[-1:] in _UNITS else t)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a size >= 1 byte such as 8, 4K or 256M, but got {text!r}")
    return value * mult


def human(nbytes: int) -> str:
    for unit, mult in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= mult and nbytes % mult == 0:
            return f"{nbytes // mult} {unit}"
    return f"{nbytes} B"


def sizes(lo: int, hi: int, factor: int) -> list[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    if out[-1] != hi:
        out.append(hi)
    return out


def _sides(name: str, nbytes: int, device: torch.device, n: int, rank: int, nccl: bool):
    """(raw, plain, prepared) callables for ``name`` on float32 buffers of ``nbytes`` per rank (>= 4 B)."""
    numel = max(n, nbytes // 4 // n * n)  # divisible by n for the split ops
    a = torch.ones(numel, device=device)
    part = torch.ones(numel // n, device=device)
    out = torch.empty(numel, device=device)
    whole = torch.empty(numel * n, device=device)
    ones = [torch.ones(numel, device=device) for _ in range(n)]
    if name == "all_reduce":
        return (functools.partial(td.all_reduce, a, td.ReduceOp.SUM), functools.partial(gd.all_reduce, a, "sum"),
                gd.prepare("all_reduce", a, "sum"))
    if name == "all_reduce_avg":  # what op="avg" is: native AVG on NCCL, sum + divide elsewhere
        if nccl:
            raw = functools.partial(td.all_reduce, a, td.ReduceOp.AVG)
        else:
            def raw():
                td.all_reduce(a, td.ReduceOp.SUM)
                a.div_(n)
        return raw, functools.partial(gd.all_reduce, a, "avg"), gd.prepare("all_reduce", a, "avg")
    if name == "reduce":
        raw = functools.partial(td.reduce, a, 0, td.ReduceOp.SUM)
        if not nccl and rank != 0:  # the same job: gloo clobbers a non-destination input, so reduce a copy
            def raw():
                td.reduce(a.clone(), 0, td.ReduceOp.SUM)
        return raw, functools.partial(gd.reduce, a, 0, "sum"), gd.prepare("reduce", a, 0, "sum")
    if name == "broadcast":
        return (functools.partial(td.broadcast, a, 0), functools.partial(gd.broadcast, a, 0),
                gd.prepare("broadcast", a, 0))
    if name == "all_gather":
        return (functools.partial(_raw_all_gather, whole, a), functools.partial(gd.all_gather_into_tensor, whole, a),
                gd.prepare("all_gather_into_tensor", whole, a))
    if name == "reduce_scatter":
        return (functools.partial(_raw_reduce_scatter, part, a, td.ReduceOp.SUM),
                functools.partial(gd.reduce_scatter_tensor, part, a, "sum"),
                gd.prepare("reduce_scatter_tensor", part, a, "sum"))
    if name == "scatter":
        xs = ones if rank == 0 else None
        return (functools.partial(td.scatter, a, xs, 0), functools.partial(gd.scatter, a, xs, 0),
                gd.prepare("scatter", a, xs, 0))
    if name == "gather":
        xs = ones if rank == 0 else None
        return (functools.partial(td.gather, a, xs, 0), functools.partial(gd.gather, a, xs, 0),
                gd.prepare("gather", a, xs, 0))
    if name == "all_to_all":
        return (functools.partial(td.all_to_all_single, out, a), functools.partial(gd.all_to_all_single, out, a),
                gd.prepare("all_to_all_single", out, a))
    if name == "send_recv":
        if n == 1:
            raw = functools.partial(out.copy_, a)
        else:
            p2p = [td.P2POp(td.isend, a, (rank + 1) % n), td.P2POp(td.irecv, out, (rank - 1) % n)]

            def raw():
                for w in td.batch_isend_irecv(p2p):
                    w.wait()
        return raw, functools.partial(gd.send_recv, out, a), gd.prepare("send_recv", out, a)
    raise ValueError(f"op: expected one of {', '.join(OPS)}, but got {name!r}")


class _Timer:
    """Host time of a block of calls, and on CUDA its device time through two events (no per-call work)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def block(self, fn, calls: int) -> tuple[float, float]:
        """(host µs per call, device µs per call); device = host on CPU."""
        if self.cuda:
            torch.cuda.synchronize()
            self.start.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        host = (time.perf_counter() - t0) / calls * 1e6
        if not self.cuda:
            return host, host
        self.end.record()
        self.end.synchronize()
        return host, self.start.elapsed_time(self.end) * 1e3 / calls


def _calls_for(nbytes: int, budget_bytes: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, budget_bytes // max(nbytes, 1)))


def measure(name: str, nbytes: int, args, device: torch.device, n: int, rank: int, nccl: bool) -> dict:
    sides = _sides(name, nbytes, device, n, rank, nccl)
    calls = _calls_for(nbytes, args.budget_bytes, args.min_calls, args.max_calls)
    timer = _Timer(device)
    for fn in sides:  # untimed warmup
        timer.block(fn, max(1, calls // 4))
    host: list[list[float]] = [[], [], []]
    dev: list[list[float]] = [[], [], []]
    for r in range(args.rounds):
        for s in order(3, r):  # each side follows every other equally often (benchmarks/_orders.py)
            h, d = timer.block(sides[s], calls)
            host[s].append(h)
            dev[s].append(d)
    del sides
    med = statistics.median
    row = {"op": name, "nbytes": nbytes, "calls": calls}
    for s, label in ((0, "raw"), (1, "plain"), (2, "prepared")):
        row[f"{label}_host"], row[f"{label}_dev"] = med(host[s]), med(dev[s])
    for s, label in ((1, "plain"), (2, "prepared")):
        row[f"{label}_extra"] = med(x - y for x, y in zip(host[s], host[0], strict=True))
        row[f"{label}_ratio_host"] = med(y / x for x, y in zip(host[s], host[0], strict=True))
        row[f"{label}_ratio_dev"] = med(y / x for x, y in zip(dev[s], dev[0], strict=True))
    return row


def _format(row: dict, cuda: bool) -> str:
    base = (f"| {row['op']} | {human(row['nbytes'])} | {row['raw_host']:.2f} | {row['plain_host']:.2f} "
            f"| {row['plain_extra']:+.2f} | {row['prepared_host']:.2f} | {row['prepared_extra']:+.2f} "
            f"| {row['plain_ratio_host']:.3f} | {row['prepared_ratio_host']:.3f} |")
    if cuda:
        base += (f" {row['raw_dev']:.2f} | {row['prepared_dev']:.2f} | {row['plain_ratio_dev']:.3f} "
                 f"| {row['prepared_ratio_dev']:.3f} |")
    return base


def _header(cuda: bool) -> list[str]:
    cols = ["op", "size", "raw host µs", "plain host µs", "plain +µs", "prepared host µs", "prepared +µs",
            "plain/raw", "prepared/raw"]
    if cuda:
        cols += ["raw device µs", "prepared device µs", "plain/raw dev", "prepared/raw dev"]
    return ["| " + " | ".join(cols) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * (len(cols) - 2)) + "|"]


def _summary(rows: list[dict], cuda: bool) -> list[str]:
    key = "dev" if cuda else "host"
    worst_prep = min(rows, key=lambda r: r[f"prepared_ratio_{key}"])
    worst_plain = max(rows, key=lambda r: r["plain_extra"])
    small = [r["plain_extra"] for r in rows if r["nbytes"] <= 64 << 10]
    lines = [f"prepared/raw ({key} time), worst cell: {worst_prep[f'prepared_ratio_{key}']:.3f} "
             f"({worst_prep['op']}, {human(worst_prep['nbytes'])}); target >= 0.97",
             f"plain +µs host, worst cell: {worst_plain['plain_extra']:+.2f} ({worst_plain['op']}, "
             f"{human(worst_plain['nbytes'])}); target <= 2"]
    if small:
        lines.append(f"plain +µs host, median over cells <= 64 KiB: {statistics.median(small):+.2f}")
    return lines


def _run(args) -> None:
    """One rank's sweep; rank 0 writes the results file row by row (an interrupted run keeps its rows)."""
    pg = gd.current()
    rank, n, device = gd.get_rank(), gd.get_world_size(), gd.device()
    nccl = gd.backend() == "nccl"
    cuda = device.type == "cuda"
    where = torch.cuda.get_device_name(device) if cuda else f"CPU ({platform.processor() or platform.machine()})"
    per = [f"{human(s)}: {_calls_for(s, args.budget_bytes, args.min_calls, args.max_calls)}" for s in args.sizes]
    head = [f"# command: {args.command}",
            f"# {pg.backend if pg else gd.backend()} on {where}, world size {n}; torch {torch.__version__}, "
            f"Python {platform.python_version()}" + ("" if cuda else "; these are CPU numbers"),
            f"# {args.rounds} rounds per cell, sides interleaved (a balanced Latin square of orders); medians over rounds",
            "# ratios are raw time / side time (>= 1: as fast as raw); +µs = side host time - raw host time",
            "# rank 0's timings; float32 buffers of the given size per rank",
            "# calls per block: " + ", ".join(per), _load(), ""] + _header(cuda)
    out = open(args.path, "w") if rank == 0 else None
    rows = []

    def emit(line: str) -> None:
        if out is not None:
            out.write(line + "\n")
            out.flush()
            print(line, flush=True)

    try:
        for line in head:
            emit(line)
        for name in args.ops:
            for nbytes in args.sizes:
                try:
                    row = measure(name, nbytes, args, device, n, rank, nccl)
                except Exception as exc:  # one op the backend lacks must not lose the others' rows
                    emit(f"| {name} | {human(nbytes)} | failed: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''} |")
                    break
                rows.append(row)
                emit(_format(row, cuda))
        if rows:
            emit("")
            for line in _summary(rows, cuda):
                emit("# " + line)
            emit(_load() + " (end)")
    finally:
        if out is not None:
            out.close()


def _load() -> str:
    """The load average: on a shared CPU machine scheduling noise can dwarf what is measured."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "# load average: unavailable"
    return f"# load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def _worker(args) -> None:
    _run(args)


def _hardware(backend: str, n: int) -> str:
    if backend == "nccl" and torch.cuda.is_available():
        name = torch.cuda.get_device_name(0).lower().replace("nvidia", "").strip().split()[0]
        return f"{name}-nccl-ws{n}"
    return "cpu-gloo" if n == 2 else f"cpu-gloo-ws{n}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="gloo", choices=("gloo", "nccl"), help="gloo (CPU) or nccl (GPU)")
    parser.add_argument("--nproc", type=int, default=None,
                        help="world size (default: 2 on gloo, 1 on nccl); 1 runs in this process")
    parser.add_argument("-b", "--min-bytes", type=parse_size, default=8, help="smallest size (default 8)")
    parser.add_argument("-e", "--max-bytes", type=parse_size, default=256 << 20, help="largest (default 256M)")
    parser.add_argument("-f", "--factor", type=int, default=8, help="size step factor (default 8)")
    parser.add_argument("--rounds", type=int, default=4 * cycle(3),
                        help=f"interleaved rounds per cell (default {4 * cycle(3)}: whole balanced cycles)")
    parser.add_argument("--min-calls", type=int, default=40, help="fewest calls per block (default 40)")
    parser.add_argument("--max-calls", type=int, default=400, help="most calls per block (default 400)")
    parser.add_argument("--budget-bytes", type=parse_size, default=4 << 30,
                        help="calls per block = this / size, clamped to [min-calls, max-calls] (default 4G)")
    parser.add_argument("--ops", default=",".join(OPS), help=f"comma-separated subset of {', '.join(OPS)}")
    parser.add_argument("--out", default=os.environ.get("OUT") or "benchmarks/results",
                        help="directory for the results file (default $OUT, else benchmarks/results)")
    args = parser.parse_args(argv)
    args.ops = args.ops.split(",")
    unknown = sorted(set(args.ops) - set(OPS))
    for bad, message in ((unknown, f"--ops: unknown {unknown}; choose from {', '.join(OPS)}"),
                         (args.factor < 2, f"-f: expected an int >= 2, but got {args.factor}"),
                         (args.rounds < 1, f"--rounds: expected an int >= 1, but got {args.rounds}"),
                         (args.min_bytes > args.max_bytes, "-b: expected a size <= -e"),
                         (args.nproc is not None and args.nproc < 1, "--nproc: expected an int >= 1")):
        if bad:
            print(f"dist_call_overhead.py: error: {message}", file=sys.stderr)
            return 2
    n = args.nproc or (2 if args.backend == "gloo" else 1)
    args.sizes = sizes(args.min_bytes, args.max_bytes, args.factor)
    pythonpath = os.environ.get("PYTHONPATH")  # which gpucomm was measured (src, or an older tree)
    args.command = ((f"PYTHONPATH={shlex.quote(pythonpath)} " if pythonpath else "") + "python "
                    + " ".join(shlex.quote(a) for a in (sys.argv if argv is None
                                                        else ["benchmarks/dist_call_overhead.py", *argv])))
    os.makedirs(args.out, exist_ok=True)
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    args.path = os.path.join(args.out, f"dist-call-overhead_{_hardware(args.backend, n)}_{date}.txt")
    if n == 1:
        with gd.init(args.backend):
            _run(args)
    else:
        gd.launch(_worker, n, args, backend=args.backend, timeout=3000)
    print(f"wrote {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
