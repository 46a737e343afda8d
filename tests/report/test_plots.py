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
