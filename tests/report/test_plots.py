from __future__ import annotations

import xml.etree.ElementTree as ET

from report_records import bench, env, scale_rows, train_rows

from gpucomm.records import ResultSet
from gpucomm.report import plots
from gpucomm.report.runs import Run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(**kinds) -> Run:
    return Run("label", __import__("pathlib").Path("."), ResultSet(env=[env()], **kinds))


def _valid(fig) -> str:
    assert fig.png.startswith(PNG_MAGIC)
    root = ET.fromstring(fig.svg)
    assert root.tag.endswith("svg")
    return fig.svg.decode()


def test_busbw_plot_has_binary_size_ticks():
    rows = [bench(size=1 << k, backend=b) for k in (10, 20, 30) for b in ("torch.cuda.comm", "gpucomm.comm")]
    fig = plots.busbw_plot([_run(bench=rows)], "all_reduce")
    svg = _valid(fig)
    assert fig.name == "busbw_all_reduce"
    for tick in ("1 KiB", "1 MiB", "1 GiB", "torch.cuda.comm", "gpucomm.comm"):
        assert tick in svg, tick


def test_speedup_plot_needs_rows_with_a_baseline():
    base = [bench(size=1 << 10, backend="torch.cuda.comm")]
    assert plots.speedup_plot([_run(bench=base)], "all_reduce") is None
    assert plots.busbw_plot([_run(bench=base)], "all_gather") is None
    rows = base + [bench(size=1 << 10, speedup=1.3, baseline="torch.cuda.comm")]
    _valid(plots.speedup_plot([_run(bench=rows)], "all_reduce"))


def test_train_and_scale_plots():
    _valid(plots.train_plot([_run(train=train_rows())]))
    svg = _valid(plots.scale_plot([_run(scale=scale_rows())]))
    assert "zero3" in svg and "32" in svg
    assert plots.train_plot([_run()]) is None and plots.scale_plot([_run()]) is None


def test_plot_files_on_disk_are_valid(gpu_report):
    for key, path in gpu_report.items():
        if key.endswith(".png"):
            assert path.read_bytes().startswith(PNG_MAGIC)
        elif key.endswith(".svg"):
            assert ET.parse(path).getroot().tag.endswith("svg")


def test_record_text_is_drawn_literally():
    rows = [bench(size=1 << 10, backend="my$lib$"), bench(size=1 << 12, backend="my$lib$")]
    svg = _valid(plots.busbw_plot([_run(bench=rows)], "all_reduce"))
    assert "my$lib$" in svg  # not mathtext (which would drop the dollars and italicise "lib")


# ----- the headline and per-op plots: one series per backend and form, noisy points marked, legends outside
def _pair(op: str, speedups: dict[int, float], form: str = "plain", noisy: tuple[int, ...] = ()) -> list:
    rows = []
    for size, speedup in speedups.items():
        base = bench(op, "torch.cuda.comm", size, time_us=10.0)
        row = bench(op, "gpucomm.comm", size, time_us=10.0 / speedup, speedup=speedup, baseline="torch.cuda.comm")
        row.form = form
        if size in noisy:
            row.time_us_p99 = row.time_us_median * 10
        rows += ([base] if form == "plain" else []) + [row]
    return rows


def _sweep() -> list:
    sizes = {1 << 10: 1.2, 1 << 16: 1.5, 1 << 20: 2.0}
    return (_pair("all_reduce", sizes) + _pair("all_reduce", {k: v * 1.2 for k, v in sizes.items()}, "prepared",
                                                 noisy=(1 << 16,))
            + _pair("gather", sizes) + _pair("gather", sizes, "prepared"))


def _drawn(monkeypatch) -> list:
    """Capture every matplotlib figure the plots save, to inspect its artists."""
    figures = []
    save = plots._save

    def keep(fig):
        figures.append(fig)
        return save(fig)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _legend_outside_every_axes(fig) -> list:
    renderer = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends, "no legend"
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            if ax.get_visible():
                assert not _overlaps(box, ax.get_window_extent(renderer)), "a legend covers the data"
    return legends


def test_headline_plot_has_a_panel_per_op_and_a_series_per_backend_and_form(monkeypatch):
    figures = _drawn(monkeypatch)
    fig = plots.headline_plot([_run(bench=_sweep())])
    svg = _valid(fig)
    (mpl,) = figures
    assert [ax.get_title() for ax in mpl.axes if ax.get_visible()] == ["all_reduce", "gather"]
    (legend,) = _legend_outside_every_axes(mpl)
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[:2] == ["gpucomm.comm vs torch.cuda.comm", "gpucomm.comm prepared vs torch.cuda.comm"]
    assert labels[-1].startswith("hollow = too noisy") and "hollow = too noisy" in svg
    colours = [h.get_color() for h in legend.legend_handles[:2]]
    assert len(set(colours)) == 2  # never a repeated colour
    styles = [h.get_linestyle() for h in legend.legend_handles[:2]]
    assert styles == ["-", "--"]  # plain solid, prepared dashed


def test_a_noisy_point_is_hollow_and_off_the_line(monkeypatch):
    figures = _drawn(monkeypatch)
    plots.headline_plot([_run(bench=_sweep())])
    ax = figures[0].axes[0]  # all_reduce
    hollow = [line for line in ax.get_lines() if line.get_markerfacecolor() == "white"]
    assert [list(line.get_xdata()) for line in hollow] == [[1 << 16]]
    lines = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert [list(line.get_xdata()) for line in lines] == [[1 << 10, 1 << 20]]  # joined over trusted sizes only


def test_per_op_plots_keep_plain_and_prepared_apart_with_the_legend_outside(monkeypatch):
    figures = _drawn(monkeypatch)
    plots.speedup_plot([_run(bench=_sweep())], "all_reduce")
    (legend,) = _legend_outside_every_axes(figures[0])
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[:2] == ["gpucomm.comm", "gpucomm.comm prepared"]
    assert any(label.startswith("hollow = too noisy") for label in labels)
    assert len({h.get_color() for h in legend.legend_handles[:2]}) == 2


def test_cpu_plots_say_so_and_gpu_plots_do_not():
    cpu = Run("label", __import__("pathlib").Path("."),
              ResultSet(env=[env(device_type="cpu")], bench=[
                  bench(size=8, backend="torch.cuda.comm", device_type="cpu"),
                  bench(size=8, speedup=1.1, baseline="torch.cuda.comm", device_type="cpu")]))
    for fig in (plots.headline_plot([cpu]), plots.speedup_plot([cpu], "all_reduce"), plots.busbw_plot([cpu], "all_reduce")):
        assert fig.title.endswith("CPU numbers") and b"CPU numbers" in fig.svg
    assert "CPU" not in plots.headline_plot([_run(bench=_sweep())]).title


def test_train_plot_ranks_strategies_fastest_first_and_says_why_one_did_not_run(monkeypatch):
    figures = _drawn(monkeypatch)
    svg = _valid(plots.train_plot([_run(train=train_rows())]))
    ax = figures[0].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()][:2] == ["replicated ×2", "ddp ×2"]
    assert "DIFFERENT from single" in svg and "not run: dp needs CUDA" in svg


def test_scale_plot_legend_sits_outside_with_a_colour_per_strategy(monkeypatch):
    figures = _drawn(monkeypatch)
    rows = scale_rows()
    rows[-1].fits = False
    plots.scale_plot([_run(scale=rows)])
    (legend,) = _legend_outside_every_axes(figures[0])
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["ddp", "zero3", "x = does not fit"]
    assert len({h.get_color() for h in legend.legend_handles[:2]}) == 2
