"""Self-contained HTML rendering of a report :class:`~gpucomm.report.document.Document`.

One file that opens from disk: CSS inline, every plot inlined as a base64 SVG data URI (an ``<img>``,
so each SVG keeps its own ids and styles), no script and no external URL.  The template is
``templates/report.html.j2`` (package data), rendered by Jinja2 with autoescape on: every string from
records is escaped, so an env block whose command line holds ``<script>`` shows it as text.
"""

from __future__ import annotations

import base64
from importlib import resources

from gpucomm.report.document import Document

__all__ = ["TEMPLATE", "render"]

TEMPLATE = "report.html.j2"
_WRAP_COLUMNS = ("note", "reason", "equal to single", "slower at")  # prose may wrap; numbers and names do not
_WIDE_FIGURES = ("headline_speedup", "train", "scale")  # several panels each: given the full width
_DENSE_COLUMNS = 16  # a table this wide (an op's two placements side by side) gets a smaller font to fit 1,280 px


def _data_uri(svg: bytes) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")


def _environment():
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["data_uri"] = _data_uri
    return env


def render(doc: Document) -> str:
    """The whole report as one HTML page."""
    source = resources.files("gpucomm.report").joinpath("templates").joinpath(TEMPLATE).read_text(encoding="utf-8")
    return _environment().from_string(source).render(doc=doc, wrap_columns=_WRAP_COLUMNS,
                                                      wide_figures=_WIDE_FIGURES, dense_columns=_DENSE_COLUMNS)
