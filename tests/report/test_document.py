"""gpucomm.report.document: the report as data that both renderers draw."""

import pytest

from gpucomm.report.document import Document, Figure, KeyValues, Paragraph, Preformatted, Section, Table


def test_each_block_says_its_kind_and_the_kind_is_not_an_argument():
    blocks = [Paragraph("hi"), KeyValues([("a", "1")]), Preformatted("cmd"),
              Table(["a"], [""], [["1"]], [""], [True]), Figure("f", "F", b"png", b"svg")]
    assert [b.kind for b in blocks] == ["paragraph", "keyvalues", "pre", "table", "figure"]
    with pytest.raises(TypeError):
        Paragraph("hi", kind="table")


def test_defaults_are_plain_text_level_2_sections_and_no_groups():
    assert Paragraph("x").tone == "" and KeyValues([]).mono is True
    t = Table(["a"], [""], [], [], [False])
    assert t.groups == [] and t.caption == ""
    s = Section("Runs")
    assert s.level == 2 and s.blocks == [] and s.anchor == ""
    assert Section("A").blocks is not Section("B").blocks  # no shared mutable default


def test_figures_lists_every_figure_in_section_order():
    f1, f2, f3 = (Figure(f"f{i}", f"F{i}", b"", b"") for i in range(3))
    doc = Document("T", "sub", banners=[Paragraph("cpu", tone="warning")], sections=[
        Section("A", blocks=[Paragraph("x"), f1]),
        Section("B", blocks=[]),
        Section("C", level=3, blocks=[f2, Preformatted("y"), f3]),
    ])
    assert doc.figures() == [f1, f2, f3]
    assert Document("T", "", [], []).figures() == []
