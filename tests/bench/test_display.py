"""The live bench view never erases or repeats finished output.

A real ``gpucomm bench`` run on CPU (two ops, a small sweep) is run in a pseudo-terminal of a fixed
size; its bytes are replayed through ``pyte`` (a VT100 emulator) and the final screen plus scrollback
must show the banner once, every finished table's title once per table, and every row once.  The
same run through ``TERM=dumb`` and through a pipe must print the same things once each.  A
:class:`LiveView` fed by hand checks the same at 80 columns without spawning a bench.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

pyte = pytest.importorskip("pyte")

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
    """Run ``argv`` with a pseudo-terminal of ``cols`` x ``rows`` as stdin/stdout/stderr; return its bytes."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=_env(term), close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                proc.kill()
                pytest.fail("gpucomm bench produced no output for 120 s")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        proc.wait(timeout=60)
    assert proc.returncode == 0, b"".join(chunks)[-2000:].decode(errors="replace")
    return b"".join(chunks)


def _screen_text(data: bytes, cols: int, rows: int) -> list[str]:
    """Every line on the final screen and in the scrollback, after replaying ``data``."""
    screen = pyte.HistoryScreen(cols, rows, history=100_000, ratio=0.5)
    screen.set_mode(pyte.modes.LNM)  # a pty turns "\n" into "\r\n"; the emulator must too
    stream = pyte.ByteStream(screen)
    stream.feed(data)
    top = ["".join(line[x].data for x in range(cols)).rstrip() for line in screen.history.top]
    return top + [line.rstrip() for line in screen.display]


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
    assert sum(bool(_ROW.match(line)) for line in lines) == len(records), text


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
