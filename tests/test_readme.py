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


@pytest.mark.slow
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


def _bash_lines() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_install_says_what_it_fetches_before_the_first_command():
    text = README.read_text()
    setup = text.split("## Set-up on a fresh machine", 1)[1]
    before = setup.split("```bash", 1)[0]
    assert "3 GB" in before and "already installed" in before
    assert "--index-url https://download.pytorch.org/whl/cpu" in before
    blocks = re.findall(r"```bash\n(.*?)```", setup.split("\n## ", 1)[0], flags=re.S)
    assert [b.strip() for b in blocks] == ["pip install -e . && gpucomm bench",
                                           'pip install -e ".[dev]" && python -m pytest']


def test_example_outputs_land_under_an_ignored_folder():
    ignored = (README.parent / ".gitignore").read_text().splitlines()
    assert "gpucomm-results/" in ignored
    for line in _bash_lines():
        for flag, path in re.findall(r"(--out|--save-profile)\s+(\S+)", line):
            assert path.startswith("gpucomm-results/"), f"{flag} {path} is not under gpucomm-results/"


def test_bench_dtype_spelling_matches_its_help():
    import argparse

    from gpucomm.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["bench"]
    help_text = sub.format_help()
    in_help = set(re.findall(r"gpucomm bench .* -d (\S+)", help_text))
    in_readme = {line.split(" -d ", 1)[1].split()[0] for line in _bash_lines()
                 if line.startswith("gpucomm bench") and " -d " in line}
    assert in_readme and in_readme == in_help, f"README -d {in_readme} vs bench --help -d {in_help}"


def test_drop_in_claim_links_the_differences():
    text = README.read_text()
    assert "same six functions, signatures, return types and semantics" not in text
    link = re.search(r"\[these differences\]\(docs/semantics\.md#([a-z0-9-]+)\)", text)
    assert link
    semantics = (README.parent / "docs" / "semantics.md").read_text()
    headings = [re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.*)$", semantics, flags=re.M)]
    assert link.group(1) in headings
