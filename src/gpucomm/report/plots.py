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

_FORMS = {"plain": 0, "prepared": 1, "graph": 2}
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
        fig.suptitle(_plain(title))
        draw(fig)
        png, svg = _save(fig)
    return Figure(name=_safe(name), title=title, png=png, svg=svg)


def _save(fig) -> tuple[bytes, bytes]:
    """A drawn figure as PNG (110 dpi) and SVG bytes, without dates or software names (reproducible files)."""
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=110, metadata={"Software": None})
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    return png.getvalue(), svg.getvalue()


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


_FORM_STYLE = {"plain": "-", "prepared": "--", "graph": ":"}
_NOISY_LABEL = "hollow = too noisy (p99 > 3x median), left out of the findings"


def _palette(keys: Sequence[tuple]) -> dict[tuple, str]:
    """A distinct colour per series key, never repeated: tab10's hues in order for up to ten series, tab20 up
    to twenty, then evenly spaced colours of a continuous map.  (The line style, not the colour, says the
    form: plain solid, prepared dashed, graph dotted.)"""
    from matplotlib import colormaps

    unique = list(dict.fromkeys(keys))
    if len(unique) <= 10:
        cmap, at = colormaps["tab10"], lambda i: i
    elif len(unique) <= 20:
        cmap, at = colormaps["tab20"], lambda i: i
    else:
        cmap, at = colormaps["turbo"], lambda i: i / (len(unique) - 1)
    return {k: _hex(cmap(at(i))) for i, k in enumerate(unique)}


def _hex(rgba) -> str:
    from matplotlib.colors import to_hex

    return to_hex(rgba)


def _series_label(run: Run, backend: str, form: str, n: int, multi: dict[str, bool]) -> str:
    """A series' legend label: backend, form, n and run as far as they tell series apart (placement is the
    marker shape, explained once)."""
    parts = [backend] + ([form] if form != "plain" else [])
    if multi["n"]:
        parts.append(f"n={n}")
    if multi["run"]:
        parts.append(f"[{run.tag}]")
    return " ".join(parts)


def _bench_series(runs: Sequence[Run], op: str, value: Callable[[object], float | None]):
    """One line per run, backend, form, placement and n of one op: (label, colour, in-place, points).

    Each point is (size, value, wrong, noisy); a backend and form keep their colour across placements, and
    every backend and form has its own colour (a backend's forms share its hue, in different shades).
    """
    from gpucomm.report.findings import noisy_rows

    rows = [(run, r) for run in runs for r in run.results.bench if r.op == op and value(r) is not None]
    multi = {"placement": len({r.placement for _, r in rows}) > 1, "n": len({r.n for _, r in rows}) > 1,
             "run": len({id(run) for run, _ in rows}) > 1}
    series: dict[tuple, list[tuple[int, float, bool, bool]]] = defaultdict(list)
    labels: dict[tuple, str] = {}
    for run_index, run in enumerate(runs):
        records = run.results.bench
        untrusted = noisy_rows(records)
        for i, r in enumerate(records):
            v = value(r) if r.op == op else None
            if v is None or v <= 0 or not math.isfinite(v):
                continue
            key = ((run_index, backend_key(r.backend), r.backend), _FORMS.get(r.form, 9), r.n, r.dtype,
                   r.placement != "out-of-place", r.form)
            labels[key] = _series_label(run, r.backend, r.form, r.n, multi)
            series[key].append((r.size, v, r.wrong > 0, i in untrusted))
    colours = _palette([(k[0], k[1], k[2], k[3]) for k in sorted(series)])
    return [(labels[k], colours[(k[0], k[1], k[2], k[3])], k[4], _FORM_STYLE.get(k[5], "-"), sorted(series[k]))
            for k in sorted(series)]


def _log_ratio_axis(ax, values: list[float]) -> None:
    """A log2 y axis labelled "0.5x", "1x", "2x" when ratios span more than 4x, else linear."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if values and max(values) / min(values) > 4:
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
        ax.yaxis.set_minor_formatter(NullFormatter())


def _noisy_key():
    """The legend entry that explains hollow points (neutral grey, whatever the series' colours)."""
    from matplotlib.lines import Line2D

    return Line2D([], [], marker="o", color="grey", markerfacecolor="white", linestyle="none"), _NOISY_LABEL


def _draw_bench(series, ylabel: str, log_y: bool, baseline_line: bool):
    def draw(fig) -> None:
        from matplotlib.lines import Line2D

        ax = fig.add_subplot()
        both = len({in_place for _, _, in_place, _, _ in series}) > 1  # square markers = in-place, when both
        handles: dict[str, object] = {}
        noisy = wrong = False
        for label, colour, in_place, style, points in series:
            xs, ys, bad, loose = zip(*points, strict=True)
            marker = "s" if in_place and both else "o"
            (line,) = ax.plot(xs, ys, marker=marker, markersize=4, color=colour, linestyle=style)
            handles.setdefault(_plain(label), line)
            hollow = [(x, y) for x, y, w, nz in zip(xs, ys, bad, loose, strict=True) if nz and not w]
            if hollow:
                ax.plot(*zip(*hollow, strict=True), marker, color=colour, markerfacecolor="white", markersize=7,
                        linestyle="none")
                noisy = True
            errors = [(x, y) for x, y, w in zip(xs, ys, bad, strict=True) if w]
            if errors:
                ax.plot(*zip(*errors, strict=True), "X", color="red", markersize=9, linestyle="none")
                wrong = True
        _size_axis(ax, [p[0] for *_, pts in series for p in pts])
        values = [p[1] for *_, pts in series for p in pts]
        if log_y:
            ax.set_yscale("log")
        else:
            _log_ratio_axis(ax, values)
        if baseline_line:
            handles["baseline (1.0x)"] = ax.axhline(1.0, color="black", linewidth=1, linestyle=":")
        ax.set_ylabel(ylabel)
        if both:
            handles["square = in-place, round = out-of-place"] = Line2D([], [], marker="s", color="grey",
                                                                        linestyle="none")
        if noisy:
            handle, text = _noisy_key()
            handles[text] = handle
        if wrong:
            handles["WRONG result"] = Line2D([], [], marker="X", color="red", linestyle="none", markersize=9)
        ax.legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
                  fontsize=7, frameon=False)
    return draw


def busbw_plot(runs: Sequence[Run], op: str) -> Figure | None:
    """Bus bandwidth against size for one op: one line per backend and form (in-place points square)."""
    series = _bench_series(runs, op, lambda r: r.busbw_gbps)
    if not series:
        return None
    return _render(f"busbw_{op}", f"{op}: bus bandwidth vs size{cpu_tag(runs)}",
                   _draw_bench(series, "busbw (GB/s, per direction)", log_y=True, baseline_line=False), width=8.0)


def speedup_plot(runs: Sequence[Run], op: str) -> Figure | None:
    """Speedup against each row's baseline (baseline median time / row median time) vs size for one op."""
    series = _bench_series(runs, op, lambda r: r.speedup if r.baseline and r.baseline != r.backend else None)
    if not series:
        return None
    baselines = sorted({r.baseline for run in runs for r in run.results.bench
                        if r.op == op and r.baseline and r.baseline != r.backend and r.speedup is not None})
    return _render(f"speedup_{op}", f"{op}: speedup vs {' / '.join(baselines)} (above 1 = faster){cpu_tag(runs)}",
                   _draw_bench(series, "baseline time / time", log_y=False, baseline_line=True), width=8.0)


def bench_plots(runs: Sequence[Run], op: str) -> list[Figure]:
    """The busbw and speedup plots of one op (those that have data)."""
    return [f for f in (busbw_plot(runs, op), speedup_plot(runs, op)) if f is not None]


def headline_plot(runs: Sequence[Run]) -> Figure | None:
    """Speedup against size, one small panel per op, one line per backend pair and form: the report's first figure.

    Each filled point is the median speedup at that size over the rows a finding trusts (not wrong, not
    noisy; see :mod:`gpucomm.report.findings`), so the picture and the sentences beside it agree; a size
    where every row was too noisy shows a hollow point, never joined to the line.  The legend sits under
    the panels, outside the data.
    """
    from gpucomm.report.findings import pair_findings

    found = [f for f in pair_findings(runs) if f.by_size or f.untrusted_by_size]
    if not found:
        return None
    multi = len({f.run for f in found}) > 1
    ops = list(dict.fromkeys(f.op for f in found))
    keys = list(dict.fromkeys(((f.run, backend_key(f.backend), f.backend), _FORMS.get(f.form, 9)) for f in found))
    colours = _palette(keys)
    cols = min(len(ops), 5 if len(ops) > 4 else len(ops))
    rows = -(-len(ops) // cols)
    baselines = sorted({f.baseline for f in found})

    def draw(fig) -> None:
        axes = fig.subplots(rows, cols, sharex=True, squeeze=False)
        sizes = [z for f in found for z, _ in (*f.by_size, *f.untrusted_by_size)]
        labelled: set[str] = set()
        for k, ax in enumerate(axes.flat):
            if k >= len(ops):
                ax.set_visible(False)
                continue
            op = ops[k]
            values = []
            for f in (f for f in found if f.op == op):
                key = ((f.run, backend_key(f.backend), f.backend), _FORMS.get(f.form, 9))
                label = _plain(f"{f.pair}" + (f" [{runs[f.run].tag}]" if multi else ""))
                colour, style = colours[key], _FORM_STYLE.get(f.form, "-")
                if f.by_size:
                    xs, ys = zip(*f.by_size, strict=True)
                    ax.plot(xs, ys, marker="o", markersize=4, color=colour, linestyle=style,
                            label=None if label in labelled else label)
                    labelled.add(label)
                    values += ys
                if f.untrusted_by_size:
                    xs, ys = zip(*f.untrusted_by_size, strict=True)
                    ax.plot(xs, ys, "o", color=colour, markerfacecolor="white", markersize=6,
                            label=None if _NOISY_LABEL in labelled else _NOISY_LABEL)
                    labelled.add(_NOISY_LABEL)
                    values += ys
                    if label not in labelled:  # a pair with only noisy points still has its legend entry
                        ax.plot([], [], color=colour, linestyle=style, label=label)
                        labelled.add(label)
            ax.axhline(1.0, color="black", linewidth=1, linestyle=":")
            _log_ratio_axis(ax, values + [1.0])
            ax.set_title(op, fontsize=9, family="monospace")
            _size_axis(ax, sizes)
            ax.set_xlabel("")
            ax.tick_params(labelsize=7)
        for ax in axes[:, 0]:
            ax.set_ylabel("speedup (x)")
        handles, labels = [], []
        for ax in fig.axes:
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                if lab not in labels and lab != _NOISY_LABEL:
                    handles.append(h)
                    labels.append(lab)
        if _NOISY_LABEL in labelled:  # the marker key, neutral grey, last
            handle, text = _noisy_key()
            handles.append(handle)
            labels.append(text)
        for ax in axes[-1, :]:
            ax.set_xlabel("message size", fontsize=8)
        fig.legend(handles, labels, loc="outside lower center", ncol=min(3, max(1, len(labels))), fontsize=8,
                   frameon=False)

    title = (f"speedup vs {' / '.join(baselines)} per op (above the dotted line = faster){cpu_tag(runs)}")
    return _render("headline_speedup", title, draw, width=12.0, height=1.2 + 2.3 * rows)


def _train_bar(r, tag: str) -> tuple[str, float, str, str]:
    """(label, samples/s, text at the bar's end, colour) of one train row."""
    label = f"{r.strategy} ×{r.n_devices}" + tag
    if r.status != "ok" or r.samples_per_s is None:
        why = "FAILED" if r.status == "failed" else "not run"
        return label, 0.0, f"{why}: {r.note.split('; ')[0].split(' (')[0]}", "#9b1c1c" if r.status == "failed" else "grey"
    parts = [f"{r.samples_per_s:,.1f} samples/s"]
    if r.scaling_efficiency is not None and r.n_devices > 1:
        parts.append(f"{100 * r.scaling_efficiency:.0f}% scaling efficiency")
    if r.equal_to_single is not None:
        parts.append("equal to single" if r.equal_to_single else "DIFFERENT from single")
    colour = "#c0392b" if r.equal_to_single is False else "#2f5d9b"
    return label, r.samples_per_s, " · ".join(parts), colour


def train_plot(runs: Sequence[Run]) -> Figure | None:
    """Training throughput per strategy and device count, fastest first: one horizontal bar each.

    Each bar says its samples/s, scaling efficiency and equality verdict at its end; a strategy whose
    results differ from single's is red, one that failed or could not run here has no bar and says why.
    Bars, not lines: device counts are few, and a line would suggest measurements between them.
    """
    models = {r.model for run in runs for r in run.results.train}
    tagged = sum(1 for run in runs if run.results.train) > 1
    bars = []
    for run in runs:
        for r in run.results.train:
            tag = (f" {r.model}" if len(models) > 1 else "") + (f" [{run.tag}]" if tagged else "")
            bars.append(_train_bar(r, tag))
    if not any(value > 0 for _, value, _, _ in bars):
        return None
    bars.sort(key=lambda b: -b[1])
    top = max(value for _, value, _, _ in bars)

    def draw(fig) -> None:
        ax = fig.add_subplot()
        ys = range(len(bars))
        ax.barh(ys, [b[1] for b in bars], color=[b[3] for b in bars], height=0.6)
        for y, (_, value, text, _) in zip(ys, bars, strict=True):
            ax.text(value + top * 0.01, y, _plain(text), va="center", fontsize=8)
        ax.set_yticks(list(ys), [_plain(b[0]) for b in bars])
        ax.invert_yaxis()  # fastest at the top
        ax.set_xlim(0, top * 1.9)  # room for the text after the longest bar
        ax.set_xlabel("samples/s (median over timed steps)")
        ax.grid(axis="y", visible=False)
    return _render("train", f"training throughput per strategy, fastest first{cpu_tag(runs)}", draw, width=9.0,
                   height=1.0 + 0.45 * len(bars))


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

    colours = _palette(sorted(series))

    def draw(fig) -> None:
        ax_t, ax_e = fig.subplots(1, 2)
        any_oom = False
        for key, points in sorted(series.items()):
            label, colour = key[1], colours[key]
            points.sort(key=lambda r: r.gpus)
            ok = [r for r in points if r.fits]
            ax_t.plot([r.gpus for r in ok], [r.samples_per_s for r in ok], marker="o", color=colour,
                      label=_plain(label))
            ax_e.plot([r.gpus for r in ok], [100 * r.scaling_efficiency for r in ok], marker="o", color=colour)
            oom = [r for r in points if not r.fits]
            if oom:
                ax_t.plot([r.gpus for r in oom], [r.samples_per_s for r in oom], "x", color=colour, markersize=8)
                any_oom = True
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
        if any_oom:
            from matplotlib.lines import Line2D

            ax_t.add_line(Line2D([], [], marker="x", color="grey", linestyle="none", label="x = does not fit"))
        fig.legend(loc="outside lower center", ncol=min(5, len(series) + any_oom), fontsize=7, frameon=False)
    return _render("scale", "advise --scale: predicted throughput and efficiency", draw, width=9.0)
