"""Measured link ceilings: the bars every gpucomm op is judged against on the machine at hand.

Measures, in one process, with CUDA events (untimed warmup, median of repeats):

* device-local copy per GPU (bytes read + written counted, as p2pBandwidthLatencyTest's diagonal does),
* host→device and device→host from pinned and from pageable memory, per GPU,
* pairwise device→device copies between distinct GPUs (per direction), when there are two or more,
* all host links at once (every GPU copying from its own pinned buffer concurrently),

and prints a table; ``--json PATH`` writes the rows as JSON Lines.  Datasheet numbers are never used.

Usage::

    python benchmarks/ceilings.py [--mib 1024] [--repeats 10] [--json out.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch


def _time_ms(fn, repeats: int, streams: list[torch.cuda.Stream]) -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` runs, events on the first stream after all join."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        main = torch.cuda.current_stream()
        start.record(main)
        for s in streams:
            s.wait_stream(main)
        fn()
        for s in streams:
            main.wait_stream(s)
        end.record(main)
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _row(what: str, nbytes: int, ms: float, counted: int = 1) -> dict:
    return {"what": what, "bytes": nbytes, "ms": round(ms, 4), "gbps": round(counted * nbytes / ms / 1e6, 2)}


def _device_rows(d: int, nbytes: int, repeats: int) -> list[dict]:
    """Device-local copy and the host links of one GPU."""
    dev = torch.device("cuda", d)
    slow = max(3, repeats // 3)  # pageable copies are slow and synchronous
    with torch.cuda.device(dev):
        a = torch.empty(nbytes, dtype=torch.uint8, device=dev).random_()
        b = torch.empty_like(a)
        pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        pageable = torch.empty(nbytes, dtype=torch.uint8)
        return [
            _row(f"cuda:{d} device copy (read+write)", nbytes, _time_ms(lambda: b.copy_(a), repeats, []), 2),
            _row(f"pinned -> cuda:{d}", nbytes, _time_ms(lambda: a.copy_(pinned, non_blocking=True), repeats, [])),
            _row(f"cuda:{d} -> pinned", nbytes, _time_ms(lambda: pinned.copy_(a, non_blocking=True), repeats, [])),
            _row(f"pageable -> cuda:{d}", nbytes, _time_ms(lambda: a.copy_(pageable), slow, [])),
            _row(f"cuda:{d} -> pageable", nbytes, _time_ms(lambda: pageable.copy_(a), slow, [])),
        ]


def measure(mib: int, repeats: int) -> list[dict]:
    nbytes = mib << 20
    n = torch.cuda.device_count()
    rows = []
    for d in range(n):
        rows += _device_rows(d, nbytes, repeats)
    for src in range(n):
        for dst in range(n):
            if src == dst:
                continue
            a = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{src}").random_()
            b = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{dst}")
            with torch.cuda.device(src):
                rows.append(_row(f"cuda:{src} -> cuda:{dst}", nbytes,
                                 _time_ms(lambda a=a, b=b: b.copy_(a, non_blocking=True), repeats, [])))
    if n > 1:
        bufs = [(torch.empty(nbytes, dtype=torch.uint8, pin_memory=True),
                 torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{d}")) for d in range(n)]
        streams = [torch.cuda.Stream(device=f"cuda:{d}") for d in range(n)]

        def all_links():
            for (host, devbuf), s in zip(bufs, streams, strict=True):
                with torch.cuda.stream(s):
                    devbuf.copy_(host, non_blocking=True)

        rows.append(_row(f"pinned -> all {n} GPUs at once (sum)", n * nbytes, _time_ms(all_links, repeats, streams)))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=1024, help="buffer size in MiB (default 1024)")
    p.add_argument("--repeats", type=int, default=10, help="timed repeats per measurement (median)")
    p.add_argument("--json", metavar="PATH", help="write rows as JSON Lines")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/ceilings.py needs CUDA devices; none are visible", file=sys.stderr)
        return 2
    rows = measure(args.mib, args.repeats)
    print(f"# {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}, torch {torch.__version__}, "
          f"{args.mib} MiB buffers, median of {args.repeats}; GB/s = 1e9 B/s")
    for r in rows:
        print(f"{r['what']:<44} {r['ms']:>10.3f} ms {r['gbps']:>10.1f} GB/s")
    if args.json:
        with open(args.json, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
