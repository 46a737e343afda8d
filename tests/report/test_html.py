from __future__ import annotations

import base64
import re
from html.parser import HTMLParser

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
    assert "<li><b>answer</b>: 33 rows, 1 WRONG (left out)</li>" in body
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
