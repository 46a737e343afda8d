"""docs/*.md: every generated block matches its results file, and every figure in prose has a source.

The mechanism is :mod:`gpucomm.report.docs`; this test is what CI runs.  The real docs are checked first,
then the rules themselves on small synthetic docs, so that the checks are known to fail when they should.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpucomm.cli import main
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


# ----- the rules, on synthetic docs ------------------------------------------------------------------------
def _repo(tmp_path: Path, doc_text: str) -> Path:
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    rows = [{"what": "pinned -> cuda:0", "bytes": 1 << 30, "ms": 19.48, "gbps": 55.12}]
    (results / "ceilings_x_2026-12-03.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "page.md"
    doc.write_text(doc_text)
    return doc


_MARK = "<!-- generated: ceilings from benchmarks/results/ceilings_x_2026-12-03.jsonl -->\n<!-- end generated -->\n"


def test_regenerate_fills_a_block_and_then_it_is_fresh(tmp_path):
    doc = _repo(tmp_path, "# t\n\n" + _MARK)
    assert docs.check(doc)  # empty block: stale
    assert docs.regenerate(doc)
    assert "| pinned -> cuda:0 | 55.1 |" in doc.read_text()
    assert docs.check(doc) == [] and not docs.regenerate(doc)


def test_a_hand_edited_block_is_stale(tmp_path):
    doc = _repo(tmp_path, "# t\n\n" + _MARK)
    docs.regenerate(doc)
    doc.write_text(doc.read_text().replace("55.1", "56.0"))
    (problem,) = docs.check(doc)
    assert "page.md:3: ceilings from benchmarks/results/ceilings_x_2026-12-03.jsonl is stale" in problem


def test_a_marker_naming_a_missing_file_fails(tmp_path):
    doc = _repo(tmp_path, _MARK.replace("ceilings_x", "nosuch_x"))
    with pytest.raises(docs.DocError, match="nosuch_x_2026-12-03.jsonl does not exist"):
        docs.check(doc)


def test_unknown_kind_and_unclosed_block_fail(tmp_path):
    with pytest.raises(docs.DocError, match="unknown block kind 'nope'"):
        docs.check(_repo(tmp_path, _MARK.replace("ceilings from", "nope from")))
    with pytest.raises(docs.DocError, match="not closed"):
        list(docs.blocks(_repo(tmp_path / "b", _MARK.splitlines()[0] + "\n")))


@pytest.mark.parametrize(("prose", "expected"), [
    ("Pinned copies ran at 55.12 GB/s.", "has no source"),
    ("Pinned copies ran at 55.12 GB/s ([c](../benchmarks/results/ceilings_x_2026-12-03.jsonl)).", None),
    ("Pinned copies ran at 55.1 GB/s ([c](../benchmarks/results/ceilings_x_2026-12-03.jsonl)).", None),
    ("Pinned copies ran at 57.3 GB/s ([c](../benchmarks/results/ceilings_x_2026-12-03.jsonl)).", "57.3"),
    ("It ran 3.5× faster ([c](../benchmarks/results/gone.jsonl)).", "not in the repository"),
    ("The target is ≥ 0.97× at every size, within 10% of the link.", None),
    ("Sizes 8 B – 1 GiB, step 4.", None),
])
def test_prose_figures_need_a_linked_file_that_contains_them(tmp_path, prose, expected):
    doc = _repo(tmp_path, "# t\n\n" + _MARK + "\n" + prose + "\n")
    problems = docs.prose_problems(doc)
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and expected in problems[0], problems


def test_figures_inside_generated_blocks_and_code_are_not_prose(tmp_path):
    doc = _repo(tmp_path, "# t\n\n" + _MARK + "\n```text\nran at 99.9 GB/s\n```\n")
    docs.regenerate(doc)
    assert docs.prose_problems(doc) == []


def test_cli_doc_check_exit_status(tmp_path, capsys):
    doc = _repo(tmp_path, "# t\n\n" + _MARK)
    assert main(["report", "--doc", str(doc), "--check"]) == 1
    assert "is stale" in capsys.readouterr().err
    assert main(["report", "--doc", str(doc)]) == 0
    assert main(["report", "--doc", str(doc), "--check"]) == 0
    assert docs.main(["--kinds"]) == 0 and "bench-pairs" in capsys.readouterr().out
