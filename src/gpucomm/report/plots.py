"""Plots of records: bus bandwidth and speedup against size, training throughput, advisor scaling.

Every plot is drawn from records only (no re-measuring, no model), on matplotlib's Agg canvas with
an explicit :class:`matplotlib.figure.Figure` — never pyplot, so building a report neither changes
the caller's backend nor leaks global figures.  Each function returns a
:class:`~gpucomm.report.document.Figure` holding PNG and SVG bytes, or ``None`` when the records give
nothing to draw.

Size axes are log2 with KiB/MiB/GiB tick labels (binary prefixes, as sizes are written everywhere in
gpucomm); bandwidths are GB/s = 10^9 B/s per direction.  When a report compares several runs, each
line's label names its run.  A plot of CPU numbers says so in its title, so an image copied out of the
report cannot pass for GPU figures.
"""

from __future__ import annotations

import io
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from gpucomm.report._format import fmt_bytes
from gpucomm.report.document import Figure
from gpucomm.report.runs import Run

__all__ = ["bench_plots", "busbw_plot", "headline_plot", "scale_plot", "speedup_plot", "train_plot"]

_RC = {"svg.hashsalt": "gpucomm-report", "svg.fonttype": "none", "font.size": 9, "axes.grid": True, "grid.alpha": 0.3}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _plain(text: str) -> str:
    """Record text as matplotlib shows it literally: "$" would start mathtext, a leading "_" hides a label."""
    text = text.replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def backend_key(backend: str) -> tuple[int, str]:
    """Sort key: the known backends in their display order (``gpucomm.bench.backends``), then others by name."""
    from gpucomm.bench.backends import BACKENDS

    known = BACKENDS.get(backend)
    return (known.order, "") if known is not None else (1 << 30, backend)


def cpu_tag(runs: Sequence[Run]) -> str:
    """" — CPU numbers" when every run is CPU, " — CPU numbers in [b]" when some are, "" otherwise."""
    cpu = [run for run in runs if run.is_cpu]
    if not cpu:
        return ""
    if len(cpu) == len(runs):
        return " — CPU numbers"
    return " — CPU numbers in " + ", ".join(f"[{run.tag}]" for run in cpu)


def _render(name: str, title: str, draw: Callable[[object], None], width: float = 7.0,
            height: float = 4.2) -> Figure:
    """Draw on a fresh Agg figure and return it as PNG and SVG bytes."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    with matplotlib.rc_context(_RC):
        fig = MplFigure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(fig)
        draw(fig)
        fig.suptitle(_plain(title))
        png, svg = io.BytesIO(), io.BytesIO()
        fig.savefig(png, format="png", dpi=110, metadata={"Software": None})
        fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    return Figure(name=_safe(name), title=title, png=png.getvalue(), svg=svg.getvalue())


def _size_axis(ax, sizes: Iterable[int]) -> None:
    """Log2 x axis with binary-prefixed tick labels on powers of two (at most about 10 of them)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    sizes = [s for s in sizes if s > 0]
    ax.set_xscale("log", base=2)
    if not sizes:
        return
    lo, hi = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    # A step that divides 10 puts ticks on 1 KiB, 1 MiB and 1 GiB whatever the range.
    step = next(s for s in (1, 2, 5, 10, 20, 40) if (hi - lo) / s <= 10)
    first = -(-lo // step) * step
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in range(first, hi + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: fmt_bytes(int(round(x)))))
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_xlabel("message size (nccl-tests size column)")


def _series_label(run: Run, backend: str, placement: str, n: int, multi: dict[str, bool]) -> str:
    parts = [backend]
    if multi["placement"]:
        parts.append(placement)
    if multi["n"]:
        parts.append(f"n={n}")
    if multi["run"]:
        parts.append(f"[{run.tag}]")
    return " ".join(parts)


def _bench_series(runs: Sequence[Run], op: str, value: Callable[[object], float | None]):
    """One line per run, backend, placement and n of one op: (label, colour index, in-place, points).

    Each point is (size, value, wrong); a backend keeps its colour across placements.
    """
    rows = [(run, r) for run in runs for r in run.results.bench if r.op == op]
    multi = {"placement": len({r.placement for _, r in rows}) > 1, "n": len({r.n for _, r in rows}) > 1,
             "run": len({id(run) for run, _ in rows}) > 1}
    series: dict[tuple, list[tuple[int, float, bool]]] = defaultdict(list)
    labels: dict[tuple, str] = {}
    for run_index, run in enumerate(runs):
        for r in run.results.bench:
            v = value(r) if r.op == op else None
            if v is None or v <= 0 or not math.isfinite(v):
                continue
            key = (run_index, backend_key(r.backend), r.n, r.dtype, r.placement != "out-of-place")
            labels[key] = _series_label(run, r.backend, r.placement, r.n, multi)
            series[key].append((r.size, v, r.wrong > 0))
    colours = {k[:4]: i for i, k in enumerate(dict.fromkeys(k[:4] for k in sorted(series)))}
    return [(labels[k], colours[k[:4]], k[4], sorted(series[k])) for k in sorted(series)]


def _draw_bench(series, ylabel: str, log_y: bool, baseline_line: bool):
    def draw(fig) -> None:
        ax = fig.add_subplot()
        wrong_labelled = False
        both = len({in_place for _, _, in_place, _ in series}) > 1  # dashed = in-place, when both exist
        for label, colour, in_place, points in series:
            xs, ys, wrong = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", markersize=3, color=f"C{colour % 10}",
                    linestyle="--" if in_place and both else "-", label=_plain(label))
            bad = [(x, y) for x, y, w in zip(xs, ys, wrong, strict=True) if w]
            if bad:
                ax.plot(*zip(*bad, strict=True), "X", color="red", markersize=9, linestyle="none",
                        label=None if wrong_labelled else "WRONG result")
                wrong_labelled = True
        _size_axis(ax, [p[0] for *_, pts in series for p in pts])
        values = [p[1] for *_, pts in series for p in pts]
        if log_y:
            ax.set_yscale("log")
        elif max(values) / min(values) > 4:  # ratios spanning a wide range read best on a log scale
            from matplotlib.ticker import FuncFormatter, NullFormatter

            ax.set_yscale("log", base=2)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        if baseline_line:
            ax.axhline(1.0, color="black", linewidth=1, linestyle=":", label="baseline (1.0x)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    return draw


def busbw_plot(runs: Sequence[Run], op: str) -> Figure | None:
    """Bus bandwidth against size for one op, one line per backend (in-place dashed)."""
    series = _bench_series(runs, op, lambda r: r.busbw_gbps)
    if not series:
        return None
    return _render(f"busbw_{op}", f"{op}: bus bandwidth vs size{cpu_tag(runs)}",
                   _draw_bench(series, "busbw (GB/s, per direction)", log_y=True, baseline_line=False))


def speedup_plot(runs: Sequence[Run], op: str) -> Figure | None:
    """Speedup against each row's baseline (baseline median time / row median time) vs size for one op."""
    series = _bench_series(runs, op, lambda r: r.speedup if r.baseline and r.baseline != r.backend else None)
    if not series:
        return None
    baselines = sorted({r.baseline for run in runs for r in run.results.bench
                        if r.op == op and r.baseline and r.baseline != r.backend and r.speedup is not None})
    return _render(f"speedup_{op}", f"{op}: speedup vs {' / '.join(baselines)} (above 1 = faster){cpu_tag(runs)}",
                   _draw_bench(series, "baseline time / time", log_y=False, baseline_line=True))


def bench_plots(runs: Sequence[Run], op: str) -> list[Figure]:
    """The busbw and speedup plots of one op (those that have data)."""
    return [f for f in (busbw_plot(runs, op), speedup_plot(runs, op)) if f is not None]


def headline_plot(runs: Sequence[Run]) -> Figure | None:
    """Speedup against size for every op and backend pair, one line each: the report's first figure.

    Each point is the median speedup at that size over the rows a finding trusts (not wrong, not
    noisy; see :mod:`gpucomm.report.findings`), so the picture and the sentences beside it agree.
    """
    from gpucomm.report.findings import pair_findings

    found = [f for f in pair_findings(runs) if f.by_size]
    if not found:
        return None
    multi = len(runs) > 1
    series = [(f"{f.op} {f.backend}" + ("" if f.form == "plain" else f" {f.form}")
               + (f" [{runs[f.run].tag}]" if multi else ""), k, False,
               [(z, s, False) for z, s in f.by_size]) for k, f in enumerate(found)]
    baselines = sorted({f.baseline for f in found})
    return _render("headline_speedup", f"speedup vs {' / '.join(baselines)}, every op (above 1 = faster)"
                   f"{cpu_tag(runs)}", _draw_bench(series, "baseline time / time", log_y=False, baseline_line=True))


def train_plot(runs: Sequence[Run]) -> Figure | None:
    """Training samples/s and scaling efficiency as bars grouped by device count, one bar per strategy.

    Bars, not lines: device counts are few and strategies often have one count each, and a line would
    suggest measurements between the points.
    """
    models = {r.model for run in runs for r in run.results.train}
    tagged = sum(1 for run in runs if run.results.train) > 1
    bars: dict[str, dict[int, tuple[float, float | None]]] = defaultdict(dict)
    for run in runs:
        for r in run.results.train:
            if r.status != "ok" or r.samples_per_s is None:
                continue
            label = (r.strategy + (f" {r.model}" if len(models) > 1 else "")
                     + (f" [{run.tag}]" if tagged else ""))
            bars[label][r.n_devices] = (r.samples_per_s, r.scaling_efficiency)
    if not bars:
        return None
    devices = sorted({n for per in bars.values() for n in per})
    width = 0.8 / len(bars)

    def draw(fig) -> None:
        ax_t, ax_e = fig.subplots(1, 2)
        for k, (label, per) in enumerate(bars.items()):
            xs = [devices.index(n) + (k - (len(bars) - 1) / 2) * width for n in per]
            ax_t.bar(xs, [v[0] for v in per.values()], width, label=_plain(label), color=f"C{k % 10}")
            eff = [(x, v[1]) for x, v in zip(xs, per.values(), strict=True) if v[1] is not None]
            if eff:
                ax_e.bar([e[0] for e in eff], [100 * e[1] for e in eff], width, label=_plain(label), color=f"C{k % 10}")
        for ax in (ax_t, ax_e):
            ax.set_xticks(range(len(devices)), [str(n) for n in devices])
            ax.set_xlabel("devices")
            ax.grid(axis="x", visible=False)
        ax_t.set_ylabel("samples/s (median over timed steps)")
        ax_e.set_ylabel("scaling efficiency (%)")
        ax_e.axhline(100, color="black", linewidth=1, linestyle=":")
        ax_t.legend(fontsize=7)
    return _render("train", f"training throughput and scaling efficiency{cpu_tag(runs)}", draw, width=9.0)


def scale_plot(runs: Sequence[Run]) -> Figure | None:
    """``advise --scale``: predicted throughput and efficiency against GPUs (log2 x); OOM points as x."""
    series: dict[tuple, list] = defaultdict(list)
    hardware = {r.hardware for run in runs for r in run.results.scale}
    tagged = sum(1 for run in runs if run.results.scale) > 1
    for i, run in enumerate(runs):
        for r in run.results.scale:
            label = r.strategy + (f" {r.hardware}" if len(hardware) > 1 else "") + (f" [{run.tag}]" if tagged else "")
            series[(i, label)].append(r)
    if not series:
        return None

    def draw(fig) -> None:
        ax_t, ax_e = fig.subplots(1, 2)
        for (_, label), points in sorted(series.items()):
            points.sort(key=lambda r: r.gpus)
            ok = [r for r in points if r.fits]
            (line,) = ax_t.plot([r.gpus for r in ok], [r.samples_per_s for r in ok], marker="o",
                                label=_plain(label))
            ax_e.plot([r.gpus for r in ok], [100 * r.scaling_efficiency for r in ok], marker="o", label=_plain(label),
                      color=line.get_color())
            oom = [r for r in points if not r.fits]
            if oom:
                ax_t.plot([r.gpus for r in oom], [r.samples_per_s for r in oom], "x", color=line.get_color(),
                          markersize=8, label=_plain(f"{label} (does not fit)"))
        gpus = sorted({r.gpus for pts in series.values() for r in pts})
        for ax in (ax_t, ax_e):
            ax.set_xscale("log", base=2)
            ax.set_xticks(gpus, [str(g) for g in gpus])
            ax.minorticks_off()
            if len(gpus) > 8:
                ax.tick_params(axis="x", labelrotation=45)
            ax.set_xlabel("GPUs")
        ax_t.set_yscale("log")
        ax_t.set_ylabel("predicted samples/s")
        ax_e.set_ylabel("predicted scaling efficiency (%)")
        ax_t.legend(fontsize=7)
    return _render("scale", "advise --scale: predicted throughput and efficiency", draw, width=9.0)
