"""The top-level entry point: --version, --help, no command, and `python -m gpucomm`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpucomm import __version__, cli


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"gpucomm {__version__}"


def test_no_command_is_a_usage_error(capsys):
    assert cli.main([]) == 2
    assert "usage: gpucomm" in capsys.readouterr().err


def test_unknown_command_exits_2():
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2


def test_help_lists_every_subcommand():
    out = subprocess.run([sys.executable, "-m", "gpucomm", "--help"], capture_output=True, text=True, check=True)
    for name in cli.SUBCOMMANDS:
        assert name in out.stdout
