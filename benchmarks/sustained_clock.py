"""Burst vs sustained: does a point timed the way ``gpucomm measure`` times it run at the clock a training step sees?

``gpucomm measure`` times each point in a short window (a few iterations after the GPU sat idle while the point's
modules were built); a training loop keeps the GPU busy for minutes at its power limit.  If the power controller
needs longer than a point's window to settle, a point runs at a higher clock than the steps it predicts, and the
advisor predicts steps too fast (the H200 single-GPU check read 10 of 13 cases 2-9% too fast).

Per layer shape (the profile's own modules, :mod:`gpucomm.advisor.compute.modules`, at shapes of the single-GPU
check's cases): build, warm up, leave the GPU idle for a second (as between points), then

1. ``burst``: the point's window as ``gpucomm measure`` timed it before it settled each point
   (``compute.measure.time_phases`` with ``shapes.repeats``, no settling run);
2. ``run``: the same forward + backward back to back for ``--seconds``, a CUDA event after each iteration (the
   host enqueues and synchronises every eighth iteration, so it never runs far ahead), NVML's SM clock and power
   read at each synchronisation; each iteration's time is placed on a time axis from the run's start, and the
   medians over windows of that axis are printed — the settling of the clock, if any, and its time constant;
3. ``hot``: the burst window again, right after the run;
4. ``measure``: after another idle second, the window as ``gpucomm measure`` times it now, with the settling
   run of :data:`~gpucomm.advisor.compute.shapes.SETTLE_S` for a layer first: how close it comes to ``settled``.

Printed per shape: burst, hot, the medians by window, ratio of the last window to burst.  Nothing is fitted: this
reads whether, and how fast, the clock settles under each load.

Usage (one H200, about 10 s a shape)::

    PYTHONPATH=src python benchmarks/sustained_clock.py --out benchmarks/results/sustained-clock_h200x1_DATE.txt
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
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from gpucomm.advisor.compute import modules  # noqa: E402
from gpucomm.advisor.compute.measure import time_phases  # noqa: E402
from gpucomm.advisor.compute.shapes import SETTLE_S, LayerShape, Rates, expected_s, repeats  # noqa: E402

SHAPES = {
    "gpt-774m (mb12 x 1024)": LayerShape(family="gpt", hidden=1280, heads=20, kv_heads=20, ffn=5120, seq=1024, mb=12),
    "gpt-2.7b (mb3 x 2048)": LayerShape(family="gpt", hidden=2560, heads=32, kv_heads=32, ffn=10240, seq=2048, mb=3),
    "llama-2.9b (mb2 x 4096)": LayerShape(family="llama", hidden=2560, heads=20, kv_heads=4, ffn=6912, seq=4096,
                                          mb=2),
    "llama-160m (mb16 x 1024)": LayerShape(family="llama", hidden=896, heads=14, kv_heads=2, ffn=2432, seq=1024,
                                           mb=16),
    "gpt-150m-8k (mb1 x 8192)": LayerShape(family="gpt", hidden=1024, heads=16, kv_heads=16, ffn=4096, seq=8192,
                                           mb=1),
}
WINDOWS = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0)


def _nvml(device: torch.device):
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda._get_nvml_device_index(device))
        return lambda: (pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                        pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0)
    except Exception:  # clocks are context; the timings stand without them
        return lambda: (0, 0.0)


def one(name: str, s: LayerShape, device: torch.device, seconds: float, read) -> list[str]:
    with device:
        mod = modules.init_(modules.layer(s))
    x = torch.randn(s.mb, s.seq, s.hidden, device=device, requires_grad=True)
    dy = torch.randn(s.mb, s.seq, s.hidden, device=device) * 1e-3
    held = {}

    def fwd():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            held["y"] = mod(x)

    def bwd():
        held.pop("y").backward(dy)
        for p in mod.parameters():
            p.grad = None
        x.grad = None

    reps = repeats(expected_s("layer", s, Rates()))
    time_phases([fwd, bwd], device, 2, 2)
    torch.cuda.synchronize(device)
    time.sleep(1.0)
    burst = sum(time_phases([fwd, bwd], device, *reps))
    clock_burst = read()

    stream = torch.cuda.current_stream(device)
    start = torch.cuda.Event(enable_timing=True)
    start.record(stream)
    evs, reads = [], []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            fwd()
            bwd()
            e = torch.cuda.Event(enable_timing=True)
            e.record(stream)
            evs.append(e)
        torch.cuda.synchronize(device)
        reads.append(read())
    ends = [start.elapsed_time(e) * 1e-3 for e in evs]
    per = [b - a for a, b in zip([0.0, *ends[:-1]], ends, strict=True)]
    hot = sum(time_phases([fwd, bwd], device, *reps))
    clock_hot = read()
    torch.cuda.synchronize(device)
    time.sleep(1.0)
    now = sum(time_phases([fwd, bwd], device, *reps, SETTLE_S["layer"]))
    clock_now = read()

    rows = []
    for lo, hi in zip(WINDOWS, WINDOWS[1:], strict=False):
        inside = [p for p, t in zip(per, ends, strict=True) if lo <= t < hi]
        if inside:
            rows.append(f"{lo:g}-{hi:g} s {statistics.median(inside) * 1e3:.3f} ms (n={len(inside)})")
    last = [p for p, t in zip(per, ends, strict=True) if t >= ends[-1] / 2]
    settled = statistics.median(last)
    clocks = [c for c, _ in reads[len(reads) // 2:]]
    watts = [w for _, w in reads[len(reads) // 2:]]
    return [f"## {name}: {s.family} hidden {s.hidden}, ffn {s.ffn}, {s.heads}/{s.kv_heads} heads, "
            f"{s.mb} x {s.seq} tokens, ac {s.ac}",
            f"burst (gpucomm measure's window, {reps[0]}+{reps[1]} iterations after 1 s idle): {burst * 1e3:.3f} ms; "
            f"SM {clock_burst[0]} MHz, {clock_burst[1]:.0f} W right after",
            f"run of {seconds:g} s ({len(per)} iterations), median by window from its start: " + "; ".join(rows),
            f"settled (second half of the run): {settled * 1e3:.3f} ms, SM {statistics.median(clocks):.0f} MHz, "
            f"{statistics.median(watts):.0f} W (medians of NVML reads)",
            f"hot burst (the window again right after the run): {hot * 1e3:.3f} ms; SM {clock_hot[0]} MHz",
            f"measure's window with its {SETTLE_S['layer']:g} s settling run, after 1 s idle: {now * 1e3:.3f} ms; "
            f"SM {clock_now[0]} MHz",
            f"settled / burst = {settled / burst:.4f}; hot / burst = {hot / burst:.4f}; "
            f"settled / measure = {settled / now:.4f}", ""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--seconds", type=float, default=6.0)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("sustained_clock: needs a CUDA GPU (the clock under load is what it reads)", file=sys.stderr)
        return 2
    dev = torch.device("cuda:0")
    read = _nvml(dev)
    lines = ["# burst vs sustained: the clock a gpucomm measure point sees vs a training step's", "",
             f"command: python benchmarks/sustained_clock.py --seconds {args.seconds:g}"
             + (f" --out {args.out}" if args.out else ""),
             f"date: {_dt.date.today()}; device: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}", ""]
    for name, s in SHAPES.items():
        lines += one(name, s, dev, args.seconds, read)
        torch.cuda.empty_cache()  # one's modules and inputs are gone with its frame
        print("\n".join(lines[-8:]), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
