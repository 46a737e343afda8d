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
