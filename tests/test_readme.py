"""README.md's examples print what README.md says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
PAIRS = re.findall(r"```python\n(.*?)```\s*```text\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples():
    assert len(PAIRS) >= 2


@pytest.mark.parametrize(("code", "expected"), PAIRS, ids=[f"example{i}" for i in range(len(PAIRS))])
def test_example_output(tmp_path, code, expected):
    script = tmp_path / "example.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected.strip()


def test_readme_error_example_is_real():
    import torch

    import gpucomm.comm as comm

    shown = re.search(r"ValueError: (chunk_sizes: .*)", README.read_text()).group(1)
    with pytest.raises(ValueError) as exc:
        comm.scatter(torch.zeros(4), ["cpu", "cpu"], chunk_sizes=[1, 2])
    assert str(exc.value) == shown
