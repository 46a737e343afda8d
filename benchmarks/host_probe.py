"""How steady is ``gpucomm advise --host this``'s reading of a host, and what does a whole step read there?

``--host this`` times the shipped profile's most host-paced ``op`` layer point per family on this machine's GPU
and scales the profile's host time by the ratio (:func:`gpucomm.advisor.compute.measure.host_ratios`).  The
time it scales is a layer's marginal time inside whole ``op`` steps (the profile's steps of 2 and 8 layers,
``profile._Tables._step_host``), measured on the profile's machine at one moment.  This script, on a GPU of the
profile's model, repeats ``rounds`` times, interleaved:

* the isolated probe, one timing per family (the ratio ``--host this`` takes a median of);
* the same shapes' whole ``op`` steps at the profile's two layer counts, and their marginal per layer over the
  profile's (what a step-based probe would read);
* a CPU-only dispatch proxy: 5 x 5,000 ``x.add_(1)`` on a one-element CPU tensor, the median microseconds per
  call (the host alone, no GPU).

It prints one row per round and the medians.  ``--widths`` also times whole ``op`` steps of 2 and 8 layers
at other widths (4,096 tokens, an 8,192-entry vocabulary, head dim 64; Llama with a quarter of the heads as KV
heads and a 3.5h MLP) and prints each one's marginal time a layer beside the device work the profile's
lookups price for that layer: whether a layer's host time depends on its shape, and how a step composes the
host's time with the device's.  Usage (one GPU of the shipped profile's model)::

    PYTHONPATH=src python benchmarks/host_probe.py --rounds 5 --out benchmarks/results/host-probe_h200x1_DATE.txt
    PYTHONPATH=src python benchmarks/host_probe.py --rounds 3 --widths 128,768,1536,2560
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


def cpu_proxy_us() -> float:
    """Median microseconds of one ``x.add_(1)`` on a one-element CPU tensor (5 windows of 5,000 calls)."""
    x = torch.zeros(1)
    windows = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(5000):
            x.add_(1)
        windows.append((time.perf_counter() - t) / 5000 * 1e6)
    return statistics.median(windows)


def _widths(ctx, src, widths: list[int], rounds: int) -> str:
    """Whole op steps of 2 and 8 layers per family and width: the marginal time a layer (median over rounds)
    beside the device work the profile's lookups price for the layer (module docstring)."""
    from gpucomm.advisor.compute import measure
    from gpucomm.advisor.compute.shapes import LayerShape

    rows = ["| family | hidden | marginal ms a layer (rounds) | device ms a layer (lookups) | marginal / device |",
            "|---|---:|---|---:|---:|"]
    for fam in ("gpt", "llama"):
        for w in widths:
            heads = max(1, w // 64)
            s = LayerShape(family=fam, hidden=w, heads=heads, kv_heads=heads if fam == "gpt" else max(1, heads // 4),
                           ffn=4 * w if fam == "gpt" else 256 * max(1, round(3.5 * w / 256)), seq=4096, mb=1,
                           ac="op")
            marg = []
            for _ in range(rounds):
                t = []
                for n in (2, 8):
                    t.append(measure.step_seconds(ctx, s, 8192, n))
                    torch.cuda.empty_cache()
                marg.append(src.marginal_s(s.key(), 8192, (2, t[0]), (8, t[1])))  # the optimizer's share out
            notes: list[str] = []
            try:
                lay = src._tables.layer(s, 1, "eager", notes)
                dev = lay.compute_s + lay.memory_s
            except Exception:  # outside what the lookups price: say so, keep the row
                dev = float("nan")
            m = statistics.median(marg)
            rows.append(f"| {fam} | {w} | {m * 1e3:.2f} ({', '.join(f'{x * 1e3:.2f}' for x in marg)}) | "
                        f"{dev * 1e3:.2f}{' (extrapolated)' if notes else ''} | {m / dev:.2f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from _shipped import shipped_here
    from gpucomm.advisor.compute import measure, profile
    from gpucomm.advisor.compute.profile import layer_shape_of
    from gpucomm.advisor.compute.shapes import Rates, expected_s

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--hardware", default="h200-nvswitch", help="the shipped profile's --hardware")
    ap.add_argument("--widths", default="", help="comma-separated hidden sizes of extra whole op steps")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    try:
        widths = [int(w) for w in args.widths.split(",") if w.strip()]
    except ValueError:
        print(f"host_probe: error: --widths {args.widths!r}: expected hidden sizes like 128,768", file=sys.stderr)
        return 2
    if args.rounds < 1:
        print(f"host_probe: error: --rounds: expected a count >= 1, but got {args.rounds}; pass --rounds 5",
              file=sys.stderr)
        return 2
    prof = shipped_here(args.hardware, "host_probe")
    if prof is None:
        return 2
    src = profile.ProfileSource(prof)
    points = src.host_points()
    steps = {fam: v for (fam, mode), v in src.host_steps().items() if mode == "op"}  # this study reads op steps
    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        print(line, flush=True)

    say("# How steady is --host this's reading of the host, and what do whole op steps read")
    say()
    say(f"command: python benchmarks/host_probe.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    from gpucomm.env import collect_env

    say(f"date: {_dt.date.today().isoformat()}; device: {torch.cuda.get_device_name()}; host CPU "
        f"{collect_env('cpu').host.get('cpu_model', '?')}; profile {prof.source} (its host: "
        f"{prof.env.get('host', {}).get('cpu_model', 'not recorded')})")
    for fam, (a, b, _) in sorted(steps.items()):
        say(f"profile {fam}: op layer point {(points[fam]['fwd_s'] + points[fam]['bwd_s']) * 1e3:.2f} ms; whole op "
            f"steps {a['layers']} layers {a['seconds'] * 1e3:.1f} ms, {b['layers']} layers {b['seconds'] * 1e3:.1f} ms")
    say()
    fams = sorted(points)
    say("| round | " + " | ".join(f"{f} layer x | {f} step marginal ms (x)" for f in fams) + " | cpu add_ us |")
    say("|---:|" + "---:|---:|" * len(fams) + "---:|")
    ctx = measure._Ctx(torch.device("cuda", torch.cuda.current_device()), prof.precision, prof.software,
                       busy=False, window_s=measure.HOST_WINDOW_S)  # timed as the probe times
    got: dict[str, list[float]] = {}
    for i in range(args.rounds):
        cells = []
        for fam in fams:
            row = points[fam]
            s = layer_shape_of(row)
            lay = measure._layer(ctx, s, expected_s("layer", s, Rates()))
            ratio = (lay["fwd_s"] + lay["bwd_s"]) / (row["fwd_s"] + row["bwd_s"])
            got.setdefault(f"{fam} layer", []).append(ratio)
            cells.append(f"{ratio:.2f}")
            if fam in steps:
                a, b, _ = steps[fam]
                here = []
                for r in (a, b):
                    here.append(measure.step_seconds(ctx, layer_shape_of(r["layer"]), r["vocab"], r["layers"],
                                                     r.get("loss", "upcast"), expected=r["seconds"]))
                    torch.cuda.empty_cache()
                m_here, m_there = (src.marginal_s(a["layer"], a["vocab"], (a["layers"], ta), (b["layers"], tb))
                                   for ta, tb in (here, (a["seconds"], b["seconds"])))
                got.setdefault(f"{fam} step", []).append(m_here / m_there)
                cells.append(f"{m_here * 1e3:.2f} (x{m_here / m_there:.2f})")
            else:
                cells.append("—")
        proxy = cpu_proxy_us()
        got.setdefault("cpu", []).append(proxy)
        say(f"| {i} | " + " | ".join(cells) + f" | {proxy:.2f} |")
    if widths:
        say()
        say(_widths(ctx, src, widths, args.rounds))
    say()
    say("medians: " + "; ".join(f"{k} x{statistics.median(v):.2f} (range {min(v):.2f}-{max(v):.2f})"
                                if k != "cpu" else f"cpu add_ {statistics.median(v):.2f} us"
                                for k, v in got.items()))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
