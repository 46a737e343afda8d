"""Why does a host-paced step move?  The CPU's own pace, the CUDA launch path and the probe's step, side by side.

On the lent H200 machines a step that the host paces (per-op checkpointing of small layers) moved by 1.25-2x
between its own ten timed steps while device-bound steps held within 1.1x, and the ``--host this`` probe's
reading of the same host moved 0.87-1.39x within a minute, with no hypervisor steal at all
(benchmarks/results/gpu-logs-r25_h200x1_2026-12-04).  What moves?  Each round here times, back to back, for
``--window`` seconds each:

* ``python``: a fixed pure-Python workload (dict and attribute work, no torch): the CPU core's pace as the
  interpreter sees it;
* ``launch``: one tiny CUDA kernel launched over and over (``add_`` on a one-element tensor), host time a launch:
  the driver and PyTorch dispatch path every eager operator takes;
* ``op step``: the probe's GPT ``op`` whole step of 2 layers and of 8 (the shipped profile's most host-paced step
  shape, as ``gpucomm advise --host this`` times it), their marginal a layer; with the garbage collector's time
  in those steps (:class:`gpucomm.hostload.GcTimer`).

and prints each round's rates over their medians, then the correlation of the op step's marginal with each.
If the Python pace moves with it, the CPU core itself slows (a host-level neighbour on a sibling thread, a
lower turbo clock: no steal shows); if only the op step moves, its own work (the collector, the allocator) does.
Usage (one GPU)::

    PYTHONPATH=src python benchmarks/host_speed.py --seconds 120 --out benchmarks/results/host-speed_h200x1_DATE.txt
"""

from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))  # run from the tree, as the GPU machine does (PYTHONPATH=src)


class _Obj:
    __slots__ = ("a", "b")

    def __init__(self, a: int) -> None:
        self.a, self.b = a, a + 1


def python_work() -> int:
    """A fixed interpreter workload of ~1 ms: dict updates, object creation and attribute reads."""
    d: dict[int, int] = {}
    acc = 0
    for i in range(2000):
        o = _Obj(i)
        d[i % 97] = d.get(i % 97, 0) + o.b
        acc += o.a
    return acc + len(d)


def rate(fn, window_s: float) -> float:
    """Calls of ``fn`` a second over at least ``window_s`` seconds of calls."""
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - t0
        if el >= window_s:
            return n / el


def launch_rate(t: torch.Tensor, window_s: float) -> float:
    """Host launches a second of a one-element ``add_`` (no sync inside the window; the device drains after)."""
    def burst() -> None:
        for _ in range(100):
            t.add_(1)

    got = rate(burst, window_s) * 100
    torch.cuda.synchronize(t.device)
    return got


def main(argv: list[str] | None = None) -> int:
    from _shipped import shipped_here
    from gpucomm import hostload
    from gpucomm.advisor.compute import measure, profile
    from gpucomm.advisor.compute.profile import layer_shape_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="rounds until this long has passed (default 120)")
    ap.add_argument("--window", type=float, default=0.3, help="seconds of each timing (default 0.3, the probe's)")
    ap.add_argument("--hardware", default="h200-nvswitch")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.window <= 0:
        print(f"host_speed: error: --seconds/--window: expected positive seconds, but got {args.seconds}/"
              f"{args.window}", file=sys.stderr)
        return 2
    prof = shipped_here(args.hardware, "host_speed")
    if prof is None:
        return 2
    src = profile.ProfileSource(prof)
    a, b, there = src.host_steps()[("gpt", "op")]
    device = torch.device("cuda", torch.cuda.current_device())
    ctx = measure._Ctx(device, prof.precision, prof.software, busy=False, window_s=args.window)
    t = torch.zeros(1, device=device)
    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        print(line, flush=True)

    say("# Why does a host-paced step move? The CPU's pace, the launch path and the probe's op step, interleaved")
    say()
    say(f"command: python benchmarks/host_speed.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"date: {_dt.date.today().isoformat()}; device: {torch.cuda.get_device_name(device)}; torch "
        f"{torch.__version__}; profile {prof.source}; op step: GPT {layer_shape_of(a['layer']).hidden}-wide "
        f"{a['layers']} and {b['layers']} layers, marginal a layer ({there * 1e3:.2f} ms in the profile)")
    say()
    rows: list[tuple[float, float, float, float, float]] = []
    t_end = time.perf_counter() + args.seconds
    try:
        while time.perf_counter() < t_end:
            py = rate(python_work, args.window)
            ln = launch_rate(t, args.window)
            cpus = hostload.snapshot()
            with hostload.GcTimer() as gct:
                ta, tb = (measure.step_seconds(ctx, layer_shape_of(r["layer"]), r["vocab"], r["layers"],
                                               r.get("loss", "upcast"), expected=r["seconds"]) for r in (a, b))
            st = hostload.steal_since(cpus)
            marg = src.marginal_s(a["layer"], a["vocab"], (a["layers"], ta), (b["layers"], tb))
            rows.append((py, ln, marg, gct.seconds, st.most if st else float("nan")))
            torch.cuda.empty_cache()
    except KeyboardInterrupt:  # a timeout keeps the rounds done
        say("(interrupted: the rounds below are what finished)")
    if len(rows) < 3:
        say("fewer than three rounds: nothing to correlate")
    else:
        mp, ml, mm = (statistics.median(r[i] for r in rows) for i in range(3))
        say(f"medians: python {mp:,.0f} calls/s, launch {ml:,.0f}/s, op marginal {mm * 1e3:.2f} ms a layer "
            f"(x{mm / there:.2f} the profile's)")
        say()
        say("| round | python pace (x median) | launch pace (x median) | op marginal (x median) | gc in the op steps | "
            "steal, most-stolen CPU |")
        say("|---:|---:|---:|---:|---:|---:|")
        for i, (py, ln, marg, g, st) in enumerate(rows):
            say(f"| {i} | {py / mp:.2f} | {ln / ml:.2f} | {marg / mm:.2f} | {g * 1e3:.1f} ms | {st:.1%} |")
        say()
        slow = [1 / (r[0] / mp) for r in rows], [1 / (r[1] / ml) for r in rows], [r[2] / mm for r in rows]
        say(f"correlation of the op marginal with the python slowdown (median/pace): "
            f"{statistics.correlation(slow[2], slow[0]):+.2f}; with the launch slowdown: "
            f"{statistics.correlation(slow[2], slow[1]):+.2f}; spread (max/min): python "
            f"{max(slow[0]) / min(slow[0]):.2f}x, launch {max(slow[1]) / min(slow[1]):.2f}x, op marginal "
            f"{max(slow[2]) / min(slow[2]):.2f}x over {len(rows)} rounds")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
