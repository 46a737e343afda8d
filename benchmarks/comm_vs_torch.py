"""gpucomm.comm against torch.cuda.comm, in one process, on the visible GPUs.

For every op and message size (geometric, 8 B to 1 GiB by default) both implementations run on the
same device list, with an untimed warmup, then many timed iterations measured with CUDA events
(median and p99; inputs rotated among several buffers for small sizes so that caches do not flatter
either side).  The two sides alternate in blocks (ABBA); the table's ``ratio`` is the median over blocks of
each block's torch median / our median (paired: load that drifts between blocks moves both of a pair alike;
the files of 2026-12-04 up to comm-vs-torch-r4 give the ratio of the pooled medians): above 1 we are faster.  ``ok`` says
whether the two results were equal (checked once per size).

Ops (``size`` is the larger per-participant buffer, as in nccl-tests):

=====================  ===================================  =========================================
op                     gpucomm.comm                         torch.cuda.comm baseline
=====================  ===================================  =========================================
broadcast              broadcast(x, devices)                broadcast(x, devices)
broadcast_coalesced    16 tensors of size/16                broadcast_coalesced
reduce_add             reduce_add(ts, devices[0])           reduce_add
reduce_add_coalesced   16 tensors of size/16 per device     reduce_add_coalesced
scatter                scatter(x, devices)                  scatter
gather                 gather(ts of size/n, 0, devices[0])  gather
gather_to_cpu          gather(ts, 0, "cpu")                 gather(ts, 0, "cpu")
scatter_from_pageable  scatter(pageable CPU x, devices)     scatter
scatter_from_pinned    scatter(pinned CPU x, devices)       scatter
reduce                 reduce(ts, devices[0])               reduce_add
all_reduce             all_reduce(ts, out=)                 reduce_add + broadcast(out=)
all_gather             all_gather(ts of size/n, out=)       gather(out=) + broadcast(out=)
reduce_scatter         reduce_scatter(ts)                   reduce_add + scatter
all_to_all             all_to_all(chunks, out=)             one scatter(out=) per participant
=====================  ===================================  =========================================

Usage::

    python benchmarks/comm_vs_torch.py                                  # all visible GPUs (1 GPU: cuda:0 x4)
    python benchmarks/comm_vs_torch.py --devices cuda:0,cuda:0,cuda:0,cuda:0 --max-bytes 64M
    python benchmarks/comm_vs_torch.py --ops gather_to_cpu,scatter_from_pageable --json out.jsonl
    python benchmarks/comm_vs_torch.py --out "$OUT"     # writes comm-vs-torch_<hardware>_<date>.txt/.jsonl

With ``--out DIR`` (default: ``$OUT`` when set) the table also goes to
``DIR/comm-vs-torch_<hardware>_<date>.txt`` and every row to the ``.jsonl`` beside it (a header
object with the command first, then one object per row, flushed as it is measured).  ``--budget-s``
stops starting new points once that many seconds have passed (the rows so far are kept), so a run
fits the time it is given; the default sweep (8 B - 256 MiB, every op) takes about 2-3 minutes on
one H200.

Times are GPU timestamps between events recorded before the call and after every device's current
stream has caught up, so they include host-side issue time whenever the GPU waits for it.  Without
CUDA the script exits with status 2: torch.cuda.comm does not run on CPUs.
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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

HOST_OPS = {"gather_to_cpu", "scatter_from_pageable", "scatter_from_pinned"}
OPS = ["broadcast", "broadcast_coalesced", "reduce_add", "reduce_add_coalesced", "scatter", "gather", "gather_to_cpu",
       "scatter_from_pageable", "scatter_from_pinned", "reduce", "all_reduce", "all_gather", "reduce_scatter",
       "all_to_all"]


@dataclass
class Row:
    op: str
    size_bytes: int
    n: int
    devices: str
    torch_median_us: float
    torch_p99_us: float
    ours_median_us: float
    ours_p99_us: float
    ratio: float
    iters: int
    correct: bool | None
    ours_algbw_GBps: float


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def sizes(lo: int, hi: int, factor: int) -> list[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    if out and out[-1] != hi:
        out.append(hi)  # the largest size asked for is always measured
    return out


def human(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:g} {unit}"
    return f"{n} B"


# ----- workloads -------------------------------------------------------------------------------------
def make(op: str, size: int, devices: list[torch.device]) -> tuple[Callable, Callable, Callable[[], None]]:
    """(ours(), theirs(), rotate()) for one op and size; inputs are built here, outside the timing."""
    import torch.cuda.comm as tc

    import gpucomm.comm as gc

    n = len(devices)
    numel = max(1, size // 4)
    if op in ("reduce_scatter", "all_to_all"):  # these need n equal chunks
        numel = max(n, numel - numel % n)
    piece = max(1, numel // n)
    copies = max(1, min(8, (64 << 20) // max(size, 1)))  # rotate small inputs among several buffers
    d0 = devices[0]

    def per_device(k):
        return [[torch.randn(k, device=d) for d in devices] for _ in range(copies)]

    if op in ("broadcast", "scatter"):
        sets = [torch.randn(numel, device=d0) for _ in range(copies)]
    elif op == "broadcast_coalesced":
        sets = [[torch.randn(max(1, numel // 16), device=d0) for _ in range(16)] for _ in range(copies)]
    elif op == "reduce_add_coalesced":
        sets = [[[torch.randn(max(1, numel // 16), device=d) for _ in range(16)] for d in devices]
                for _ in range(copies)]
    elif op in ("scatter_from_pageable", "scatter_from_pinned"):
        sets = [torch.randn(numel) for _ in range(copies)]
        if op == "scatter_from_pinned":
            sets = [s.pin_memory() for s in sets]
    elif op in ("gather", "gather_to_cpu", "all_gather"):
        sets = per_device(piece)
    else:
        sets = per_device(numel)
    state = {"i": 0}
    outs: list[torch.Tensor] = []
    grid: list[list[torch.Tensor]] = []
    if op == "all_reduce":
        outs = [torch.empty(numel, device=d) for d in devices]
    elif op == "all_gather":
        outs = [torch.empty(piece * n, device=d) for d in devices]
    elif op == "all_to_all":
        grid = [[torch.empty(numel // n, device=devices[j]) for _ in range(n)] for j in range(n)]

    def cur():
        return sets[state["i"]]

    def rotate():
        state["i"] = (state["i"] + 1) % len(sets)

    table = {
        "broadcast": (lambda: gc.broadcast(cur(), devices), lambda: tc.broadcast(cur(), devices)),
        "broadcast_coalesced": (lambda: gc.broadcast_coalesced(cur(), devices),
                                lambda: tc.broadcast_coalesced(cur(), devices)),
        "reduce_add": (lambda: gc.reduce_add(cur(), d0), lambda: tc.reduce_add(cur(), d0)),
        "reduce_add_coalesced": (lambda: gc.reduce_add_coalesced(cur(), d0),
                                 lambda: tc.reduce_add_coalesced(cur(), d0)),
        "scatter": (lambda: gc.scatter(cur(), devices), lambda: tc.scatter(cur(), devices)),
        "scatter_from_pageable": (lambda: gc.scatter(cur(), devices), lambda: tc.scatter(cur(), devices)),
        "scatter_from_pinned": (lambda: gc.scatter(cur(), devices), lambda: tc.scatter(cur(), devices)),
        "gather": (lambda: gc.gather(cur(), 0, d0), lambda: tc.gather(cur(), 0, d0)),
        "gather_to_cpu": (lambda: gc.gather(cur(), 0, "cpu"), lambda: tc.gather(cur(), 0, "cpu")),
        "reduce": (lambda: gc.reduce(cur(), d0), lambda: tc.reduce_add(cur(), d0)),
        # Both sides write n distinct outputs (out=): torch's composition would otherwise hand every
        # slot on a repeated device the same tensor, which is not an all-reduce's result.
        "all_reduce": (lambda: gc.all_reduce(cur(), out=outs),
                       lambda: tc.broadcast(tc.reduce_add(cur(), d0), out=outs)),
        "all_gather": (lambda: gc.all_gather(cur(), out=outs),
                       lambda: tc.broadcast(tc.gather(cur(), 0, out=outs[0]), out=outs[1:]) if n > 1 else outs),
        "reduce_scatter": (lambda: gc.reduce_scatter(cur()),
                           lambda: tc.scatter(tc.reduce_add(cur(), d0), devices)),
        "all_to_all": (lambda: gc.all_to_all([list(t.chunk(n)) for t in cur()], out=grid),
                       lambda: [tc.scatter(t, out=[grid[j][i] for j in range(n)]) for i, t in enumerate(cur())]),
    }
    ours, theirs = table[op]
    return ours, theirs, rotate


def flatten(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for item in x for t in flatten(item)]


def same(op: str, fa: list[torch.Tensor], b) -> bool:
    """Our flattened (snapshotted) result against torch's result ``b``."""
    fb = flatten(b)
    if op == "all_to_all":  # ours is result[j][i]; the baseline's is scatters[i][j]
        n = len(b)
        fb = [b[i][j] for j in range(n) for i in range(n)]
    if len(fa) > len(fb):  # all_gather's baseline returns the broadcast outputs out[1:]
        fa = fa[len(fa) - len(fb):]
    return len(fa) == len(fb) and all(
        x.shape == y.shape and torch.allclose(x.cpu().float(), y.cpu().float(), rtol=1e-4, atol=1e-4)
        for x, y in zip(fa, fb, strict=True))


# ----- timing ----------------------------------------------------------------------------------------
def time_call(fn: Callable, rotate: Callable, devices: list[torch.device], iters: int) -> list[float]:
    """Per-iteration microseconds: events on devices[0]'s stream, after every device caught up."""
    d0 = devices[0]
    others = sorted({d.index for d in devices} - {d0.index})
    joins = [torch.cuda.Event() for _ in others]
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    main = torch.cuda.current_stream(d0)
    for k in range(iters):
        rotate()
        starts[k].record(main)
        fn()
        for e, idx in zip(joins, others, strict=True):
            e.record(torch.cuda.current_stream(idx))
            main.wait_event(e)
        ends[k].record(main)
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends, strict=True)]


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


def measure(op: str, size: int, devices: list[torch.device], args) -> Row:
    ours, theirs, rotate = make(op, size, devices)
    check = size <= (256 << 20)
    a = ours()  # warmup, and the correctness check (a snapshot: out= ops share their buffers)
    torch.cuda.synchronize()
    fa = [t.clone() for t in flatten(a)] if check else []
    b = theirs()
    torch.cuda.synchronize()
    correct = same(op, fa, b) if check else None
    del a, b, fa
    for _ in range(args.warmup):
        ours()
        theirs()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    theirs()
    torch.cuda.synchronize()
    one = time.perf_counter() - t0
    iters = max(3, min(args.iters, int(args.time_per_point / max(one, 1e-6))))
    # interleave in blocks (ABBA order) so that drift on a shared machine hits both sides alike; two
    # halves were too coarse on the H200 (2026-12-03: scatter 0.90x at 128 B between 1.2x neighbours)
    block = max(2, iters // 8)  # about iters timed calls per side, in about 8 blocks
    blocks = max(2, iters // block)
    t_theirs: list[float] = []
    t_ours: list[float] = []
    paired: list[float] = []  # each block's torch median / ours: both sides ran back to back in that block
    for b in range(blocks):
        order = ((theirs, t_theirs), (ours, t_ours)) if b % 2 == 0 else ((ours, t_ours), (theirs, t_theirs))
        for fn, acc in order:
            acc += time_call(fn, rotate, devices, block)
        paired.append(statistics.median(t_theirs[-block:]) / statistics.median(t_ours[-block:]))
    tm, om = statistics.median(t_theirs), statistics.median(t_ours)
    return Row(op=op, size_bytes=size, n=len(devices), devices=",".join(map(str, devices)),
               torch_median_us=round(tm, 2), torch_p99_us=round(p99(t_theirs), 2),
               ours_median_us=round(om, 2), ours_p99_us=round(p99(t_ours), 2),
               ratio=round(statistics.median(paired), 3),
               iters=len(t_ours), correct=correct, ours_algbw_GBps=round(size / (om * 1e-6) / 1e9, 3))


# ----- command line ----------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", help="comma list, e.g. cuda:0,cuda:1 or cuda:0,cuda:0,cuda:0,cuda:0 "
                   "(default: every visible GPU; with one GPU, cuda:0 four times)")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma list from: {', '.join(OPS)}")
    p.add_argument("--min-bytes", type=parse_size, default=8, help="smallest size (default 8)")
    p.add_argument("--max-bytes", type=parse_size, default=256 << 20, help="largest size (default 256M)")
    p.add_argument("--host-max-bytes", type=parse_size, default=256 << 20,
                   help="largest size for the ops with a CPU end (default 256M; torch's are slow)")
    p.add_argument("--factor", type=int, default=4, help="size step (default 4)")
    p.add_argument("--iters", type=int, default=100, help="most timed iterations per side and size")
    p.add_argument("--warmup", type=int, default=3, help="untimed iterations per side and size")
    p.add_argument("--time-per-point", type=float, default=0.15,
                   help="seconds of timed work to aim for per side and size (caps --iters for big sizes)")
    p.add_argument("--json", metavar="PATH", help="also write one JSON object per row (JSON Lines)")
    p.add_argument("--out", metavar="DIR", default=os.environ.get("OUT"),
                   help="also write comm-vs-torch_<hardware>_<date>.txt and .jsonl there (default: $OUT if set)")
    p.add_argument("--date", default=datetime.date.today().isoformat(), help="date in the --out file names")
    p.add_argument("--budget-s", type=float, default=230.0,
                   help="start no new point after this many seconds (default 230: the H200 run's 4 minutes)")
    p.add_argument("--fail-below", type=float, metavar="RATIO",
                   help="exit 1 if any ratio (torch / ours) is below RATIO")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not torch.cuda.is_available():
        print("comm_vs_torch: CUDA is not available here, and torch.cuda.comm runs only on GPUs; run this on a "
              "machine with at least one GPU (use --devices cuda:0,cuda:0,... to repeat one GPU)", file=sys.stderr)
        return 2
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    unknown = [o for o in ops if o not in OPS]
    if unknown or args.factor < 2 or args.min_bytes < 1:
        print(f"comm_vs_torch: unknown ops {unknown} (choose from {OPS}), or --factor < 2, or --min-bytes < 1",
              file=sys.stderr)
        return 2
    count = torch.cuda.device_count()
    names = args.devices.split(",") if args.devices else (
        [f"cuda:{i}" for i in range(count)] if count > 1 else ["cuda:0"] * 4)
    devices = [torch.device(x.strip()) for x in names]
    if any(d.type != "cuda" or d.index is None or d.index >= count for d in devices):
        print(f"comm_vs_torch: --devices must name CUDA devices cuda:0..cuda:{count - 1}, got {names}",
              file=sys.stderr)
        return 2
    outs = [open(args.json, "a")] if args.json else []  # closed in the finally below
    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    stem = None
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        gpu = torch.cuda.get_device_name(0).lower().replace("nvidia", "").split()
        hw = next((w for w in gpu if any(c.isdigit() for c in w)), "gpu") + f"x{len({d.index for d in devices})}"
        stem = Path(args.out) / f"comm-vs-torch_{hw}_{args.date}"
        outs.append(open(f"{stem}.jsonl", "w"))
        outs[-1].write(json.dumps({"kind": "header", "command": command, "torch": torch.__version__,
                                   "devices": [str(d) for d in devices]}) + "\n")
    lines = [f"# command: {command}",
             f"# gpucomm.comm vs torch.cuda.comm | torch {torch.__version__} | {torch.cuda.get_device_name(0)} | "
             f"devices {','.join(map(str, devices))}",
             "# times in microseconds (median, p99 of CUDA-event timings); ratio = median over the interleaved blocks "
             "of the block's torch median / ours (paired: both sides ran back to back in each block), > 1: we are faster",
             f"{'op':22s} {'size':>9s} {'torch med':>10s} {'torch p99':>10s} {'ours med':>10s} {'ours p99':>10s} "
             f"{'ratio':>7s} {'GB/s':>8s} {'ok':>3s}"]
    for line in lines:
        print(line, flush=True)
    worst = float("inf")
    start = time.perf_counter()
    try:
        for op in ops:
            top = min(args.max_bytes, args.host_max_bytes) if op in HOST_OPS else args.max_bytes
            for size in sizes(args.min_bytes, top, args.factor):
                if time.perf_counter() - start > args.budget_s:
                    raise TimeoutError
                row = measure(op, size, devices, args)
                worst = min(worst, row.ratio)
                ok = "-" if row.correct is None else ("yes" if row.correct else "NO")
                line = (f"{op:22s} {human(size):>9s} {row.torch_median_us:10.1f} {row.torch_p99_us:10.1f} "
                        f"{row.ours_median_us:10.1f} {row.ours_p99_us:10.1f} {row.ratio:7.2f} "
                        f"{row.ours_algbw_GBps:8.2f} {ok:>3s}")
                lines.append(line)
                print(line, flush=True)
                for f in outs:
                    f.write(json.dumps({"kind": "comm_vs_torch", **asdict(row)}) + "\n")
                    f.flush()
                torch.cuda.empty_cache()
    except (KeyboardInterrupt, TimeoutError) as stop:
        lines.append(f"# stopped early ({'--budget-s reached' if isinstance(stop, TimeoutError) else 'interrupted'}):"
                     " the rows above are complete, later points were not run")
        print(lines[-1], flush=True)
    finally:
        for f in outs:
            f.close()
        if stem is not None:
            Path(f"{stem}.txt").write_text("\n".join(lines) + "\n")
    if args.fail_below is not None and worst < args.fail_below:
        print(f"# worst ratio {worst:.2f} is below --fail-below {args.fail_below}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
