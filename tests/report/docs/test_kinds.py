"""Block kinds are found at import: one file each, named after the kind it defines."""

from __future__ import annotations

from pathlib import Path

from gpucomm.report.docs import kinds
from gpucomm.report.docs.spec import Kind

KINDS_DIR = Path(kinds.__file__).parent


def test_every_kind_file_defines_its_kind_and_every_kind_is_found():
    files = sorted(p.stem for p in KINDS_DIR.glob("*.py") if not p.stem.startswith("_"))
    assert files == sorted(name.replace("-", "_") for name in kinds.KINDS)
    assert all(isinstance(k, Kind) and k.name == name for name, k in kinds.KINDS.items())


def test_the_kinds_the_docs_use_are_there():
    for name in ("bench-pairs", "ceilings", "comm-vs-torch", "md-table", "train", "train-host"):
        assert name in kinds.KINDS
