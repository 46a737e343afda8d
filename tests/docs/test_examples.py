"""Every Python example in README.md and docs/*.md runs, as a script, the way a reader would run it.

Per document, its ```python blocks are concatenated in order into one script (later examples may use
earlier names, as in docs/semantics.md) and run with ``python script.py`` in a fresh directory — so an
example that starts processes must guard its body with ``if __name__ == "__main__":``, as a reader's
script must (``spawn`` imports the main module again in every process).  The script must exit 0.

Two kinds of block are not run in the script:

* **a module a later example imports**: a block whose first line is a comment naming a path,
  ``# mypkg/regression.py``, is written to that path in the script's directory (which is on the path);
* **an example that needs GPUs**: a block right after the line ``<!-- example: needs N GPUs -->`` runs
  only with N CUDA devices, as a complete program of its own (with the document's modules on the path;
  the other blocks already run in the CPU test, so a GPU example repeats its imports); its test is marked
  ``requires_gpus(N)``.

Whether the printed output matches the text shown is checked by tests/test_readme.py and
tests/docs/test_semantics_md.py; this test checks that every example runs at all.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpucomm.devices import cuda_device_count

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^(?:<!-- example: needs (\d+) GPUs? -->\n)?```python[^\n]*\n(.*?)^```\s*$", re.S | re.M)
_MODULE = re.compile(r"#\s*([\w/]+\.py)\s*$")


def blocks(text: str) -> tuple[list[str], dict[str, str], list[tuple[int, str]]]:
    """(the blocks of the script, {path: module source}, [(GPUs needed, block)])."""
    script, modules, gpu = [], {}, []
    for match in _BLOCK.finditer(text):
        gpus, code = match.group(1), match.group(2)
        first = code.splitlines()[0] if code.strip() else ""
        module = _MODULE.fullmatch(first.strip())
        if module:
            modules[module.group(1)] = code
        elif gpus:
            gpu.append((int(gpus), code))
        else:
            script.append(code)
    return script, modules, gpu


def _run(tmp_path: Path, doc: Path, code: str, modules: dict[str, str]) -> None:
    for path, source in modules.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(source)
    script = tmp_path / f"{doc.stem}_examples.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")]), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=300)
    assert out.returncode == 0, f"{doc.name}'s examples as a script failed:\n{out.stderr[-3000:]}"


def _with_examples() -> list[Path]:
    return [d for d in DOCUMENTS if "```python" in d.read_text()]


def test_the_documents_with_examples_are_found():
    names = {d.name for d in _with_examples()}
    assert {"README.md", "semantics.md", "train.md"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("doc", _with_examples(), ids=lambda d: d.name)
def test_every_example_runs_as_a_script(doc, tmp_path):
    script, modules, _ = blocks(doc.read_text())
    if not script:
        pytest.skip(f"{doc.name}: every example needs GPUs")
    _run(tmp_path, doc, "\n".join(script), modules)


def _gpu_marks(n: int) -> list[pytest.MarkDecorator]:
    """``requires_gpus(n)`` as marks for ``pytest.param`` (the helper itself is a test-function decorator)."""
    found = cuda_device_count()
    return [pytest.mark.requires_gpus(n), pytest.mark.skipif(found < n, reason=f"needs {n} CUDA device(s), "
                                                                                f"found {found}")]


_GPU_EXAMPLES = [pytest.param(doc, i, marks=_gpu_marks(n), id=f"{doc.name}-{i}")
                 for doc in _with_examples() for i, (n, _) in enumerate(blocks(doc.read_text())[2])]


@pytest.mark.parametrize(("doc", "index"), _GPU_EXAMPLES or [pytest.param(None, 0, marks=pytest.mark.skip(
    reason="no example is marked as needing GPUs"))])
def test_gpu_examples_run_as_a_script(doc, index, tmp_path):
    _, modules, gpu = blocks(doc.read_text())
    _run(tmp_path, doc, gpu[index][1], modules)


def test_a_block_is_a_module_a_gpu_example_or_part_of_the_script():
    text = ("```python\n# pkg/mod.py\nX = 1\n```\n\n```python\nimport pkg.mod\n```\n\n"
            "<!-- example: needs 2 GPUs -->\n```python\nrun_on_gpus()\n```\n")
    script, modules, gpu = blocks(text)
    assert script == ["import pkg.mod\n"] and modules == {"pkg/mod.py": "# pkg/mod.py\nX = 1\n"}
    assert gpu == [(2, "run_on_gpus()\n")]
