"""The marker engine: blocks are found, rendered from their file, rewritten, and found stale when edited."""

from __future__ import annotations

import pytest

from gpucomm.report.docs import engine
from gpucomm.report.docs.spec import DocError

MARK = ("<!-- generated: ceilings from benchmarks/results/ceilings_x_2026-12-03.jsonl -->\n"
        "<!-- end generated -->\n")


def test_regenerate_fills_a_block_and_then_it_is_fresh(repo):
    doc = repo("# t\n\n" + MARK)
    assert engine.check(doc)  # empty block: stale
    assert engine.regenerate(doc)
    assert "| pinned -> cuda:0 | 55.1 |" in doc.read_text()
    assert engine.check(doc) == [] and not engine.regenerate(doc)


def test_a_hand_edited_block_is_stale(repo):
    doc = repo("# t\n\n" + MARK)
    engine.regenerate(doc)
    doc.write_text(doc.read_text().replace("55.1", "56.0"))
    (problem,) = engine.check(doc)
    assert "page.md:3: ceilings from benchmarks/results/ceilings_x_2026-12-03.jsonl is stale" in problem


def test_blocks_reads_kind_source_options_and_body(repo):
    doc = repo("# t\n\n" + MARK.replace(".jsonl -->", ".jsonl ops=a,b -->"))
    (block,) = engine.blocks(doc)
    assert (block.line, block.kind, block.source, block.options, block.body) == (
        3, "ceilings", "benchmarks/results/ceilings_x_2026-12-03.jsonl", {"ops": "a,b"}, "")


def test_a_marker_naming_a_missing_file_fails(repo):
    doc = repo(MARK.replace("ceilings_x", "nosuch_x"))
    with pytest.raises(DocError, match="nosuch_x_2026-12-03.jsonl does not exist"):
        engine.check(doc)


def test_unknown_kind_unknown_option_malformed_and_unclosed_blocks_fail(repo):
    with pytest.raises(DocError, match="unknown block kind 'nope'"):
        engine.check(repo(MARK.replace("ceilings from", "nope from")))
    with pytest.raises(DocError, match="ceilings takes no option ops; its options: none"):
        engine.check(repo(MARK.replace(".jsonl -->", ".jsonl ops=a -->")))
    with pytest.raises(DocError, match="malformed marker"):
        list(engine.blocks(repo("<!-- generated: ceilings -->\n")))
    with pytest.raises(DocError, match="not closed"):
        list(engine.blocks(repo(MARK.splitlines()[0] + "\n")))
