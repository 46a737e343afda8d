"""The one console width every command prints at: ``COLUMNS``, else the terminal's, else 120 columns."""

from __future__ import annotations

import io
import os

from gpucomm import _console


def test_columns_wins_for_pipes_and_terminals(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert _console.console_width(io.StringIO()) == 80
    assert _console.make_console(file=io.StringIO()).width == 80


def test_a_pipe_without_columns_gets_the_piped_width(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert _console.console_width(io.StringIO()) == _console.PIPED_WIDTH
    r, w = os.pipe()
    with os.fdopen(w, "w") as pipe:
        assert _console.console_width(pipe) == _console.PIPED_WIDTH
    os.close(r)


def test_nonsense_columns_is_ignored(monkeypatch):
    for value in ("", "abc", "-5", "3"):
        monkeypatch.setenv("COLUMNS", value)
        assert _console.console_width(io.StringIO()) == _console.PIPED_WIDTH


def test_a_terminal_without_columns_gets_its_own_width(monkeypatch):
    import fcntl
    import struct
    import termios

    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 97, 0, 0))
    with os.fdopen(slave, "w") as tty:
        assert _console.console_width(tty) == 97
    os.close(master)


def test_an_explicit_width_wins(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert _console.make_console(width=200, file=io.StringIO()).width == 200
