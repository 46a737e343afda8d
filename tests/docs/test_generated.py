"""docs/*.md: every generated block matches its results file, and every figure in prose has a source.

The mechanism is :mod:`gpucomm.report.docs`; this test is what CI runs on the real docs.  The rules
themselves are tested on small synthetic docs in ``tests/report/docs/``, so that the checks are known to
fail when they should.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucomm.report import docs

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
GENERATED = [d for d in DOCS if any(True for _ in docs.blocks(d))]


def test_performance_md_is_generated():
    assert ROOT / "docs" / "performance.md" in GENERATED


@pytest.mark.parametrize("doc", GENERATED, ids=[d.name for d in GENERATED])
def test_generated_blocks_are_fresh(doc):
    assert docs.check(doc) == []


@pytest.mark.parametrize("doc", GENERATED, ids=[d.name for d in GENERATED])
def test_figures_in_prose_have_a_source(doc):
    assert docs.prose_problems(doc) == []


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_docs_link_only_files_in_the_repository(doc):
    for target in re.findall(r"\]\(([^)#\s]+)", doc.read_text()):
        if "://" in target:
            continue
        assert "reference/" not in target, f"{doc.name} links {target}: the reference folder is not in the repo"
        assert (doc.parent / target).exists(), f"{doc.name} links {target}, which does not exist"
