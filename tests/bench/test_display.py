"""The live bench view never erases or repeats finished output.

A real ``gpucomm bench`` run on CPU (two ops, a small sweep) is run in a pseudo-terminal of a fixed
size; its bytes are replayed through ``pyte`` (a VT100 emulator) and the final screen plus scrollback
must show the banner once, every finished table's title once per table, and every row once.  The
same run through ``TERM=dumb`` and through a pipe must print the same things once each.  A
:class:`LiveView` fed by hand checks the same at 80 columns without spawning a bench.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pyte = pytest.importorskip("pyte")

from gpucomm.testing.terminal import run_in_pty, screen_lines  # noqa: E402

# a row: up to three name cells (backend, form, ...) then the size, e.g. "gpucomm.dist  prepared  8 KiB  ..."
_ROW = re.compile(r"^\s*(?:[A-Za-z][\w.-]*\s+){0,3}\d+(?:\.\d+)? (?:B|KiB|MiB|GiB)\s")
_TITLE = "CPU numbers (no GPU used) — "
_BANNER = "No GPU used: these are CPU numbers"


def _env(term: str, columns: int | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    env["TERM"] = term
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    return env


def _bench_argv(out: Path, backends: str | None) -> list[str]:
    argv = [sys.executable, "-m", "gpucomm", "bench", "--ops", "all_reduce,all_gather", "-b", "1K", "-e", "64K",
            "-n", "3", "-w", "1", "--out", str(out)]
    return argv + (["--backends", backends] if backends else [])


def _run_in_pty(argv: list[str], cols: int, rows: int, term: str = "xterm-256color") -> bytes:
    """Run ``argv`` in a pseudo-terminal of ``cols`` x ``rows``; return its bytes (it must succeed)."""
    try:
        code, data = run_in_pty(argv, cols, rows, env=_env(term))
    except TimeoutError as exc:
        pytest.fail(str(exc))
    assert code == 0, data[-2000:].decode(errors="replace")
    return data


def _screen_text(data: bytes, cols: int, rows: int) -> list[str]:
    """Every line on the final screen and in the scrollback, after replaying ``data``."""
    return screen_lines(data, cols, rows)


def _records(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r["kind"] == "bench"]


def _tables(records: list[dict]) -> list[str]:
    """The op of each finished table: the view starts a table whenever the op changes."""
    ops: list[str] = []
    for r in records:
        if not ops or ops[-1] != r["op"]:
            ops.append(r["op"])
    return ops


def _check_once(lines: list[str], records: list[dict]) -> None:
    text = "\n".join(lines)
    assert sum(_BANNER in line for line in lines) == 1, text
    tables = _tables(records)
    assert tables, "the run produced no rows"
    for op in set(tables):
        titles = sum(line.strip() == f"{_TITLE}{op}" for line in lines)
        assert titles == tables.count(op), f"{op}: {titles} titles for {tables.count(op)} tables\n{text}"
    # rows are counted above the closing answer: its prose wraps, and a wrapped line can start "from 64 KiB up"
    answer = next((i for i, line in enumerate(lines) if line.startswith("answer: ")), len(lines))
    assert sum(bool(_ROW.match(line)) for line in lines[:answer]) == len(records), text


@pytest.mark.slow
@pytest.mark.parametrize(("cols", "rows", "backends"), [(120, 50, None), (80, 24, "gpucomm.comm")])
def test_real_terminal_keeps_every_finished_table_once(tmp_path, cols, rows, backends):
    out = tmp_path / "run"
    data = _run_in_pty(_bench_argv(out, backends), cols, rows)
    assert b"\x1b[" in data  # it really drew a live view
    lines = _screen_text(data, cols, rows)
    _check_once(lines, _records(out))
    assert max(len(line) for line in lines) <= cols


@pytest.mark.slow
def test_dumb_terminal_prints_each_table_once(tmp_path):
    out = tmp_path / "run"
    data = _run_in_pty(_bench_argv(out, "gpucomm.comm"), 100, 30, term="dumb")
    assert b"\x1b[1A" not in data and b"\x1b[2K" not in data  # no cursor movement in a dumb terminal
    _check_once(data.decode().replace("\r\n", "\n").splitlines(), _records(out))


@pytest.mark.slow
def test_pipe_prints_each_table_once(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(_bench_argv(out, "gpucomm.comm"), capture_output=True, text=True, env=_env("xterm"),
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout
    _check_once(proc.stdout.splitlines(), _records(out))
