"""docs/semantics.md is executable: every ```python block followed by an output block is run and its
printed output must equal the output block exactly (trailing spaces aside).

Blocks run in order in one namespace per document, so later examples may use earlier names.  A
``python`` block with no output block right after it must print nothing.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "semantics.md"
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)


def examples(text: str) -> list[tuple[int, str, str]]:
    """(line, code, expected output) for every python block; expected is '' when none follows."""
    blocks = [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1, m.end(), m.start())
              for m in _FENCE.finditer(text)]
    found = []
    for k, (lang, body, line, end, _) in enumerate(blocks):
        if lang != "python":
            continue
        nxt = blocks[k + 1] if k + 1 < len(blocks) else None
        adjacent = nxt is not None and nxt[0] == "text" and text[end:nxt[4]].strip() == ""
        found.append((line, body, nxt[1] if adjacent else ""))
    return found


def _norm(s: str) -> str:
    return "\n".join(line.rstrip() for line in s.strip("\n").splitlines())


def test_the_document_has_an_example_per_function():
    import gpucomm.comm

    text = DOC.read_text()
    for name in gpucomm.comm.__all__:
        assert f"c.{name}(" in text, f"docs/semantics.md has no example calling c.{name}(...)"
    assert "## Common misconceptions" in text


def test_examples_print_what_the_document_says():
    text = DOC.read_text()
    cases = examples(text)
    assert len(cases) >= 12
    namespace: dict = {"__name__": "semantics_md"}
    for line, code, expected in cases:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, f"{DOC.name}:{line}", "exec"), namespace)  # our own document
        got = _norm(buf.getvalue())
        if got != _norm(expected):
            pytest.fail(f"docs/semantics.md line {line}: printed\n{got}\nbut the document says\n{_norm(expected)}")


def test_examples_parser_pairs_blocks():
    doc = "```python\nprint(1)\n```\n\n```text\n1\n```\n```python\nx = 2\n```\n"
    assert [(c.strip(), e.strip()) for _, c, e in examples(doc)] == [("print(1)", "1"), ("x = 2", "")]
