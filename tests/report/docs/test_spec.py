"""A block kind's contract: a marker-safe name and a line saying what it reads."""

from __future__ import annotations

import pytest

from gpucomm.report.docs.spec import DocError, Kind


def _render(path, options) -> str:
    return ""


def test_a_kind_needs_a_marker_safe_name_and_a_description():
    assert Kind("my-kind2", "x.jsonl: rows", _render).options == ()
    with pytest.raises(ValueError, match="lowercase letters"):
        Kind("My_Kind", "x", _render)
    with pytest.raises(ValueError, match="say what it reads"):
        Kind("k", "", _render)


def test_doc_error_is_a_value_error():
    assert issubclass(DocError, ValueError)
