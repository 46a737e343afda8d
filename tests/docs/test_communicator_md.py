"""docs/communicator.md: its examples print what the page shows, and its table lists every Communicator method."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpucomm.communicator import methods

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "communicator.md"
_spec = importlib.util.spec_from_file_location("semantics_md_test", Path(__file__).with_name("test_semantics_md.py"))
_semantics = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_semantics)


def test_the_table_lists_every_method_the_rows_define():
    text = DOC.read_text()
    listed = set(re.findall(r"^\| `(\w+)\(", text, re.M))
    assert listed == set(methods())


@pytest.mark.slow
def test_each_example_prints_what_the_page_shows(tmp_path):
    for line, code, expected in _semantics.examples(DOC.read_text()):
        script = tmp_path / f"example_{line}.py"
        script.write_text(code)
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                             env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"})
        assert out.returncode == 0, f"docs/communicator.md line {line}:\n{out.stderr[-2000:]}"
        assert _semantics._norm(out.stdout) == _semantics._norm(expected), f"docs/communicator.md line {line}"
