"""What is live at a training step's peak of allocated memory, by the code that allocated it.

``benchmarks/advisor_single_gpu.py`` compares the advisor's predicted peak with ``torch.cuda.max_memory_allocated``
and ``max_memory_reserved``; where they differ, this script says what the step really held at its peak.  For each
case named it builds the same model, optimizer and loop (``advisor_single_gpu.build`` and ``train_step``), runs
one step (Adam's states exist from then on), then records the caching allocator's history
(``torch.cuda.memory._record_memory_history``, Python stacks) over two more steps and replays the trace: the
moment the allocated bytes peak, every live block is grouped by the innermost frame of this benchmark's own
code that asked for it (the autograd engine's allocations have no Python frame of ours: they are grouped as
"backward").  It prints the groups largest first, the peak, ``max_memory_allocated`` and ``max_memory_reserved``
for the recorded steps, and the advisor's memory terms for the same case, side by side.

Usage (one GPU)::

    PYTHONPATH=src python benchmarks/memory_peak.py gpt-1.5b gpt-650m-mb8 --out benchmarks/results/memory-peak_h200x1_DATE.txt

Recording costs host time, not memory: the peak read is the step's own.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import advisor_single_gpu as single  # the cases, the model and the loop under study

GiB = 2**30
_OURS = Path(single.__file__).name


def _where(frames: list[dict]) -> str:
    """Where a block was asked for: the benchmark's own frames at the two ends of its stack (the model's line and
    the loop's), else ``backward`` (the autograd engine's thread has no Python frames) or the first frame."""
    ours = [f"{f['line']} {f['name']}" for f in frames if f.get("filename", "").endswith(_OURS)]
    if ours:
        return f"{_OURS}:" + (ours[0] if len(ours) == 1 else f"{ours[0]} / {ours[-1]}")
    if not frames:
        return "backward (autograd engine, no Python frame)"
    f = frames[0]
    return f"{Path(f.get('filename', '?')).name}:{f.get('line', '?')} {f.get('name', '?')}"


def live_at_peak(trace: list[dict]) -> tuple[int, dict[str, int], int]:
    """Replay allocator events: (peak allocated bytes, live bytes per allocating site at the peak, the event
    index of the peak).  Bytes are the blocks' sizes as the allocator rounded them, as max_memory_allocated
    counts them."""
    live: dict[int, tuple[int, str]] = {}
    total = peak = at = 0
    best: dict[int, tuple[int, str]] = {}
    for i, e in enumerate(trace):
        act = e["action"]
        if act == "alloc":
            live[e["addr"]] = (e["size"], _where(e.get("frames", [])))
            total += e["size"]
            if total > peak:
                peak, at, best = total, i, dict(live)
        elif act in ("free_requested", "free_completed") and e["addr"] in live:
            total -= live.pop(e["addr"])[0]
    groups: dict[str, int] = {}
    for size, where in best.values():
        groups[where] = groups.get(where, 0) + size
    return peak, groups, at


def run(c: single.Case, device: torch.device) -> list[str]:
    model, opt, data, amp = single.build(c, device)
    single.train_step(c, model, opt, data[0], amp)  # Adam's states are created here
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=2_000_000)
    for step in range(2):
        single.train_step(c, model, opt, data[(step + 1) % 2], amp)
    torch.cuda.synchronize(device)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    alloc, resv = torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device)
    trace = snap["device_traces"][device.index or 0]
    peak, groups, at = live_at_peak(trace)
    base = before  # blocks allocated before recording began (weights, Adam's states, the batches) are live too
    del model, opt, data
    gc.collect()
    torch.cuda.empty_cache()
    p = single.predict(c, "h200-nvswitch")
    out = [f"## {c.name} ({c.arch()}; mb {c.mb}, ac {c.ac}, loss {'upcast' if c.upcast else 'autocast'})", "",
           f"max_memory_allocated {alloc / GiB:.3f} GiB, max_memory_reserved {resv / GiB:.3f} GiB over the two "
           f"recorded steps; allocated before recording {base / GiB:.3f} GiB (weights, Adam's states, batches); "
           f"replayed peak {(base + peak) / GiB:.3f} GiB at event {at:,} of {len(trace):,}", "",
           "| allocated by (live at the peak) | GiB |", "|---|---:|", f"| before recording | {base / GiB:.3f} |"]
    for where, size in sorted(groups.items(), key=lambda kv: -kv[1]):
        if size >= 2**20:
            out.append(f"| {where} | {size / GiB:.3f} |")
    out += ["", "advisor's terms (gpucomm advise --json, memory_*_bytes): " + ", ".join(
        f"{k.removeprefix('memory_').removesuffix('_bytes')} {v / GiB:.3f}" for k, v in p.items()
        if k.startswith("memory_") and k.endswith("_bytes") and v) + " GiB", ""]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="+", help="case names of benchmarks/advisor_single_gpu.py, or its --case specs "
                                             "(name=..,family=..,layers=..,...)")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    names = {c.name: c for c in single.CASES}
    try:
        own = {(c := single.parse_case(a)).name: c for a in args.cases if "=" in a}
    except ValueError as exc:
        print(f"memory_peak: error: {exc}", file=sys.stderr)
        return 2
    names.update(own)
    args.cases = [a if "=" not in a else single.parse_case(a).name for a in args.cases]
    unknown = [n for n in args.cases if n not in names]
    if unknown:
        print(f"memory_peak: error: {' '.join(unknown)}: no such case; expected some of {', '.join(names)}",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("memory_peak: error: needs a CUDA device (the caching allocator's history)", file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    lines = ["# What is live at a training step's peak of allocated memory", "",
             f"command: python benchmarks/memory_peak.py {' '.join(argv if argv is not None else sys.argv[1:])}",
             f"date: {_dt.date.today().isoformat()}; device: {torch.cuda.get_device_name(device)}; torch "
             f"{torch.__version__}", ""]
    for n in args.cases:
        got = run(names[n], device)
        print("\n".join(got), flush=True)
        lines += got
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
