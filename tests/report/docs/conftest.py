"""A throw-away repository (``docs/page.md`` and one results file) for the docs engine's rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def repo(tmp_path: Path) -> Callable[[str], Path]:
    """``repo(doc_text)`` writes a repository under ``tmp_path`` (a new one per call) and returns its doc."""
    count = [0]

    def make(doc_text: str) -> Path:
        count[0] += 1
        root = tmp_path / f"repo{count[0]}"
        results = root / "benchmarks" / "results"
        results.mkdir(parents=True)
        rows = [{"what": "pinned -> cuda:0", "bytes": 1 << 30, "ms": 19.48, "gbps": 55.12}]
        (results / "ceilings_x_2026-12-03.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (root / "docs").mkdir()
        doc = root / "docs" / "page.md"
        doc.write_text(doc_text)
        return doc

    return make
