from __future__ import annotations

import base64
import re
from html.parser import HTMLParser

import pytest
from report_records import MALICIOUS


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _parse(path) -> _Collect:
    p = _Collect()
    p.feed(path.read_text())
    return p


def test_html_is_self_contained(gpu_report):
    page = gpu_report["html"].read_text()
    parsed = _parse(gpu_report["html"])
    refs = [v for _, attrs in parsed.tags for k, v in attrs.items() if k in ("src", "href")]
    assert refs, "expected inlined images and in-page links"
    assert all(v.startswith(("data:", "#")) for v in refs), [v for v in refs if not v.startswith(("data:", "#"))]
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", page)
    assert "@import" not in page and "url(" not in page
    assert not [t for t, _ in parsed.tags if t in ("script", "link", "iframe", "object")]


def test_html_inlines_every_plot_as_svg(gpu_report):
    imgs = [a["src"] for t, a in _parse(gpu_report["html"]).tags if t == "img"]
    assert len(imgs) == sum(1 for k in gpu_report if k.endswith(".svg"))
    for src in imgs:
        prefix = "data:image/svg+xml;base64,"
        assert src.startswith(prefix)
        assert b"<svg" in base64.b64decode(src[len(prefix):])


def test_html_escapes_strings_from_records(gpu_report):
    page = gpu_report["html"].read_text()
    assert MALICIOUS not in page
    assert "&lt;script&gt;" in page
    assert MALICIOUS in "".join(_parse(gpu_report["html"]).text)  # shown to the reader as text


def test_wrong_rows_are_marked_in_html(gpu_report):
    page = gpu_report["html"].read_text()
    wrong_rows = re.findall(r'<tr class="wrong">(.*?)</tr>', page, flags=re.S)
    assert any("5 WRONG" in row for row in wrong_rows)
    assert all("0.80x" in row or "DIFFERENT" in row or "1" in row for row in wrong_rows)
    assert '<tr class="oom">' in page


def test_html_opens_with_findings(gpu_report):
    page = gpu_report["html"].read_text()
    assert page.index("Findings") < page.index(">Runs<")
    assert "headline_speedup" in page and "1.25x faster" in page


# ----- structure a person reads first, and a page that does not scroll sideways ------------------------------
def _css(page: str) -> str:
    return page.split("<style>", 1)[1].split("</style>", 1)[0]


def test_findings_come_first_answer_then_summary_then_headline_plot(gpu_report):
    page = gpu_report["html"].read_text()
    body = page.split("<main>", 1)[1]
    first_h2 = re.search(r"<h2[^>]*>([^<]*)</h2>", body).group(1)
    assert first_h2 == "Findings"
    answer = body.index('<div class="answer">')
    summary = body.index('<table class="summary">')
    headline = body.index('alt="speedup vs torch.cuda.comm per op')
    assert answer < summary < headline < body.index(">Findings in detail<") < body.index(">Collectives<")
    assert '<div class="head">33 rows, 1 WRONG (left out)</div>' in body
    assert re.search(r'<td class="good">1\.25x faster<span class="sub">all sizes · ⚠ 8/9 rows \(1 WRONG\)</span></td>',
                     body)


def test_tables_cannot_scroll_sideways_and_prose_cells_wrap(gpu_report):
    css = _css(gpu_report["html"].read_text())
    assert not re.search(r"overflow(-x)?\s*:\s*(auto|scroll)", css)  # a wide table is never scrolled, it fits
    assert re.search(r"\.tablewrap \{[^}]*max-width: 100%", css) and re.search(r"\ntable \{[^}]*max-width: 100%",
                                                                                    "\n" + css.replace("\n  ", "\n"))
    assert re.search(r"td\.wrap \{[^}]*white-space: normal", css)
    assert re.search(r"thead th \{[^}]*white-space: normal", css)
    page = gpu_report["html"].read_text()
    notes = re.findall(r'<td class="wrap">', page)
    assert notes, "the note and reason columns wrap"


def test_every_plot_is_on_the_page(gpu_report):
    page = gpu_report["html"].read_text()
    names = {k.split("/")[1].rsplit(".", 1)[0] for k in gpu_report if k.startswith("plots/")}
    assert {"headline_speedup", "train", "scale"} <= names
    for name in names:
        assert f"also plots/{name}.png" in page, name


# ----- a bench report, a train report and both together: the three the screenshots show --------------------
@pytest.fixture(scope="module")
def three_reports(tmp_path_factory):
    from report_records import bench_sweep, env, train_rows, write

    from gpucomm.report import build

    root = tmp_path_factory.mktemp("three")
    bench_dir = write(root / "bench", env(device=None, device_type="cpu"), bench_sweep(device_type="cpu"))
    train_dir = write(root / "train", env(), train_rows())
    return {"bench": build(bench_dir), "train": build(train_dir), "both": build([bench_dir, train_dir], root / "both")}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bench", "train", "both"])
def test_each_report_opens_with_its_answer_fits_the_page_and_shows_every_plot(three_reports, kind):
    paths = three_reports[kind]
    page = paths["html"].read_text()
    body = page.split("<main>", 1)[1]
    assert re.search(r"<h2[^>]*>([^<]*)</h2>", body).group(1) == "Findings"
    findings = body.split('<h2 id="findings">Findings</h2>', 1)[1]
    assert findings.lstrip().startswith('<div class="answer">')  # the answer before anything else
    answers = findings.count('<div class="answer">')
    assert answers == (2 if kind == "both" else 1)
    css = _css(page)
    assert not re.search(r"overflow(-x)?\s*:\s*(auto|scroll)", css) and "max-width: 100%" in css
    plots = {k.split("/")[1].rsplit(".", 1)[0] for k in paths if k.startswith("plots/")}
    assert plots, "no plots"
    for name in plots:
        assert f"also plots/{name}.png" in page, name
    expected = {"bench": {"headline_speedup"}, "train": {"train"}, "both": {"headline_speedup", "train"}}[kind]
    assert expected <= plots
    assert "<figure" in findings.split("<h2", 1)[0]  # a picture inside the findings


def _screenshots_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "report_screenshots.py"
    spec = importlib.util.spec_from_file_location("report_screenshots", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bench", "train", "both", "gpu"])
def test_nothing_is_wider_than_a_1280_px_page_in_chromium(three_reports, gpu_report, kind):
    """Laid out by a real browser: the CSS rules above are what make this hold; this proves they do."""
    import shutil

    if not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    page = gpu_report["html"] if kind == "gpu" else three_reports[kind]["html"]
    measured = _screenshots_module().layout(page)
    assert measured["viewport"] == 1280 and measured["scroll"] <= 1280 and measured["wide"] == [], measured
