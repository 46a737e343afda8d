"""LocalCommunicator, plain and prepared, against torch.cuda.comm's ``out=`` form, in one process, interleaved.

For broadcast, reduce, scatter, gather and all_reduce, at every size from 8 B to 256 MiB (factor 4),
three sides run on the same buffers in interleaved rounds:

* **torch** — the anchor.  On CUDA, ``torch.cuda.comm``'s out= form: ``broadcast(t, out=rest)``,
  ``reduce_add(ts, destination)`` (it has no out=, so it allocates and leaves ts[root] alone: the
  anchor does *less* than ours), ``scatter(x, out=chunks)``, ``gather(ts, out=dst)``, and for
  all_reduce ``broadcast(reduce_add(ts, d0), out=ts)``.  On CPU (torch.cuda.comm needs CUDA) the
  least raw torch the op must do: ``copy_`` loops, ``torch.sum(torch.stack(ts), 0, out=)``,
  ``torch.cat(out=)`` — the numbers are then CPU numbers, host (Python + dispatcher) cost only.
* **plain** — ``LocalCommunicator.<op>(...)``, every argument checked per call.
* **prepared** — ``LocalCommunicator.prepare(op, ...)`` once, then ``p()``.

``size`` is the larger per-participant buffer (scatter's source, gather's destination).  Each round
runs as many back-to-back calls as fill ``--round-ms``, timed with ``time.perf_counter`` between two
device synchronisations (none inside the round), so a call's time is its host issue time or its
device time, whichever bounds it.  Every side runs once in every round, in the order of a balanced Latin
square (``benchmarks/_orders.py``: over 6 rounds each side follows every other side equally often, so what
one block leaves the next falls on every side alike).  The time per side is the median over ``--rounds``
rounds; each ratio is the median over rounds of that round's torch / ours (above 1: ours is faster; the
target is >= 0.97 everywhere): a paired statistic, so load that drifts across a cell's rounds moves both
sides of a pair alike.  (The result files of 2026-12-04 up to communicator-overhead-r6 give the ratio of
the two medians, over 9 rounds of 10 ms in a forward-then-reversed order; both sides are treated the same
either way.)

Writes ``communicator-overhead_<hardware>_<date>.txt`` (the table) and ``.jsonl`` (one JSON object
per row, flushed row by row, after a header object with the command) to ``--out`` (default:
``$OUT`` when set, else ``benchmarks/results``), and prints the table.

Usage::

    python benchmarks/communicator_overhead.py                          # CUDA: cuda:0 x4 on one GPU
    python benchmarks/communicator_overhead.py --devices cpu,cpu,cpu,cpu --max-bytes 1M
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' shared helpers beside this script

from _orders import cycle, order
from gpucomm.communicator import LocalCommunicator

OPS = ("broadcast", "reduce", "scatter", "gather", "all_reduce")
THEME = "communicator-overhead"


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)


def human(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}"
    return f"{n} B"


def sizes(lo: int, hi: int, factor: int) -> list[int]:
    out, s = [], lo
    while s < hi:
        out.append(s)
        s *= factor
    return [*out, hi]


def sides(comm: LocalCommunicator, op: str, size: int) -> tuple[dict[str, Callable[[], object]], int]:
    """The three callables for one op and size, on buffers built here; and the bytes actually used."""
    devs = comm.devices
    n = len(devs)
    cuda = all(d.type == "cuda" for d in devs)
    numel = max(n, size // 4)
    numel -= numel % n  # scatter and gather need n equal chunks
    # zeros: in-place sums stay finite call after call (the values are not checked here; tests do that)
    small = [torch.zeros(numel // n, device=d) for d in devs]
    big = [torch.zeros(numel, device=d) for d in devs]
    ts = [torch.zeros(numel, device=d) for d in devs]
    if op == "broadcast":
        args: tuple = (ts, 0)
    elif op == "reduce":
        args = (ts, 0, "sum")
    elif op == "all_reduce":
        args = (ts, "sum")
    elif op == "scatter":
        args = (small, big, 0)
    else:
        args = (big, small, 0)
    prepared = comm.prepare(op, *args)
    method = getattr(comm, op)
    if cuda:
        import torch.cuda.comm as tcc

        d0 = devs[0]
        anchor = {
            "broadcast": lambda: tcc.broadcast(ts[0], out=ts[1:]),
            "reduce": lambda: tcc.reduce_add(ts, destination=d0),
            "scatter": lambda: tcc.scatter(big[0], out=small),
            "gather": lambda: tcc.gather(small, out=big[0]),
            "all_reduce": lambda: tcc.broadcast(tcc.reduce_add(ts, destination=d0), out=ts),
        }[op]
    else:
        chunks = big[0].chunk(n)

        def anchor_broadcast():
            for t in ts[1:]:
                t.copy_(ts[0])

        def anchor_all_reduce():
            torch.sum(torch.stack(ts), 0, out=ts[0])
            for t in ts[1:]:
                t.copy_(ts[0])

        def anchor_scatter():
            for o, c in zip(small, chunks, strict=True):
                o.copy_(c)

        anchor = {
            "broadcast": anchor_broadcast,
            "reduce": lambda: torch.sum(torch.stack(ts), 0, out=ts[0]),
            "scatter": anchor_scatter,
            "gather": lambda: torch.cat(small, out=big[0]),
            "all_reduce": anchor_all_reduce,
        }[op]
    return {"torch": anchor, "plain": lambda: method(*args), "prepared": prepared}, numel * 4


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


def interleaved(fns: dict[str, Callable[[], object]], devs: list[torch.device], rounds: int,
                round_ms: float, ratios: dict[str, float] | None = None) -> tuple[dict[str, float], int]:
    """Median µs per call of each side (``fns["torch"]`` sets the calls per round), over ``rounds`` rounds
    that alternate the sides' order; and the calls per round.  ``ratios``, when given, receives each other
    side's median over rounds of the round's torch time / its time (the paired ratio)."""
    for fn in fns.values():  # warm up: caches, allocator, lazy imports, NCCL communicators
        _round(fn, 3, devs)
    one = max(_round(fns["torch"], 3, devs), 1.0)
    calls = max(3, min(5000, int(round_ms * 1e3 / one)))
    for fn in fns.values():  # one untimed full round each: clocks and caches settle before timing
        _round(fn, calls, devs)
    samples: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    for r in range(rounds):
        for i in order(len(names), r):  # each side follows every other equally often (benchmarks/_orders.py)
            samples[names[i]].append(_round(fns[names[i]], calls, devs))
    if ratios is not None:
        ratios.update({k: statistics.median(t / x for t, x in zip(samples["torch"], v, strict=True))
                       for k, v in samples.items() if k != "torch"})
    return {k: statistics.median(v) for k, v in samples.items()}, calls


def measure(comm: LocalCommunicator, op: str, size: int, rounds: int, round_ms: float) -> dict:
    fns, nbytes = sides(comm, op, size)
    devs = comm.devices
    ratios: dict[str, float] = {}
    med, calls = interleaved(fns, devs, rounds, round_ms, ratios)
    return {"op": op, "size_bytes": nbytes, "n": len(devs), "calls_per_round": calls, "rounds": rounds,
            "torch_us": round(med["torch"], 3), "plain_us": round(med["plain"], 3),
            "prepared_us": round(med["prepared"], 3),
            "plain_ratio": round(ratios["plain"], 3), "prepared_ratio": round(ratios["prepared"], 3)}


def start(args: argparse.Namespace, argv: list[str] | None, theme: str, gpus: list[str] | None = None
          ) -> tuple[LocalCommunicator, Path, str]:
    """The communicator (``--devices``; else ``gpus``, else cuda:0 x4 with a GPU, cpu x4 without), the
    result files' stem under ``--out`` (created), and the command line that the files quote."""
    cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
    names = args.devices.split(",") if args.devices else gpus or (["cuda:0"] * 4 if cuda else ["cpu"] * 4)
    comm = LocalCommunicator(names)
    out_dir = Path(args.out or os.environ.get("OUT") or Path(__file__).parent / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    return comm, out_dir / f"{theme}_{hardware(comm.devices)}_{args.date}", command


def sweep(cells: Iterable[tuple[str, int]], line_of: Callable[[str, int], str], lines: list[str],
          devs: list[torch.device]) -> None:
    """Each (op, size) cell's line, appended to ``lines`` and printed as it is measured; Ctrl-C (or the
    SIGINT of a time limit) ends the sweep with a note, the rows above it complete."""
    try:
        for op, size in cells:
            line = line_of(op, size)
            lines.append(line)
            print(line, flush=True)
            if devs[0].type == "cuda":
                torch.cuda.empty_cache()
    except KeyboardInterrupt:
        lines.append("# interrupted: the rows above are complete")


def hardware(devs: list[torch.device]) -> str:
    if all(d.type == "cpu" for d in devs):
        return "cpu"
    name = torch.cuda.get_device_name(devs[0]).lower()
    short = next((w for w in name.replace("nvidia", "").split() if any(c.isdigit() for c in w)), "gpu")
    return f"{short}x{len({d.index for d in devs})}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", help="comma list (default: every GPU; one GPU: cuda:0 x4; no GPU: cpu x4)")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma list from {', '.join(OPS)}")
    p.add_argument("--min-bytes", type=parse_size, default=8, help="smallest size (default 8)")
    p.add_argument("--max-bytes", type=parse_size, default=256 << 20, help="largest size (default 256M)")
    p.add_argument("--factor", type=int, default=4, help="size step (default 4)")
    # Many short alternating rounds rather than a few long ones: on the H200 (2026-12-03, 5 x 20 ms)
    # the torch side of two identical C++ loops differed by 8 us between neighbouring sizes.
    add_round_args(p, 4 * cycle(3), "the .txt and .jsonl")
    return p


def add_round_args(p: argparse.ArgumentParser, rounds: int, files: str) -> None:
    """The options of :func:`interleaved`'s rounds and of the result files, shared with stack_vs_chain.py."""
    p.add_argument("--rounds", type=int, default=rounds, help=f"timed rounds per side (median reported; default "
                   f"{rounds})")
    p.add_argument("--round-ms", type=float, default=5.0, help="milliseconds of calls per round (default 5)")
    p.add_argument("--out", help=f"directory for {files} (default: $OUT, else benchmarks/results)")
    p.add_argument("--date", default=datetime.date.today().isoformat(), help="date in the file names")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    ops = [o for o in args.ops.split(",") if o]
    if any(o not in OPS for o in ops) or args.factor < 2 or args.rounds < 1 or args.min_bytes < 1:
        print(f"communicator_overhead: --ops must come from {list(OPS)}, --factor >= 2, --rounds >= 1, "
              f"--min-bytes >= 1 (got {args.ops!r}, {args.factor}, {args.rounds}, {args.min_bytes})",
              file=sys.stderr)
        return 2
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    comm, stem, command = start(args, argv, THEME, [f"cuda:{i}" for i in range(count)] if count > 1 else None)
    devs = comm.devices
    kind = "CUDA" if devs[0].type == "cuda" else "CPU (anchor: raw torch ops; host cost only)"
    lines = [f"# command: {command}",
             f"# LocalCommunicator plain and prepared vs torch.cuda.comm out= | {kind} | torch {torch.__version__}"
             f" | devices {','.join(map(str, devs))}"
             + (f" | {torch.cuda.get_device_name(devs[0])}" if devs[0].type == "cuda" else ""),
             "# median us per call over rounds of back-to-back calls; ratio (x) = median over rounds of the round's "
             "torch / ours (> 1: ours faster)",
             f"# host load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (other work on "
             "the machine inflates single rounds; the median over rounds is reported)",
             f"{'op':11s} {'size':>8s} {'torch us':>10s} {'plain us':>10s} {'prep us':>10s} "
             f"{'plain x':>8s} {'prep x':>8s}"]
    for line in lines:
        print(line, flush=True)
    with open(f"{stem}.jsonl", "w") as js:
        js.write(json.dumps({"kind": "header", "command": command, "devices": [str(d) for d in devs],
                             "torch": torch.__version__, "anchor": kind}) + "\n")
        def cell(op: str, size: int) -> str:
            row = measure(comm, op, size, args.rounds, args.round_ms)
            js.write(json.dumps({"kind": "row", **row}) + "\n")
            js.flush()
            return (f"{op:11s} {human(row['size_bytes']):>8s} {row['torch_us']:10.2f} {row['plain_us']:10.2f} "
                    f"{row['prepared_us']:10.2f} {row['plain_ratio']:8.3f} {row['prepared_ratio']:8.3f}")

        try:
            sweep(((op, size) for op in ops for size in sizes(args.min_bytes, args.max_bytes, args.factor)), cell,
                  lines, devs)
        finally:
            Path(f"{stem}.txt").write_text("\n".join(lines) + "\n")
    print(f"# wrote {stem}.txt and {stem}.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
