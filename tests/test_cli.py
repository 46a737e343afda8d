"""The top-level entry point: --version, --help without torch, one-line usage errors, `python -m gpucomm`."""

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
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpucomm: error:") and "bench" in err[0]


def test_unknown_command_exits_2():
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2


def test_help_lists_every_subcommand():
    out = subprocess.run([sys.executable, "-m", "gpucomm", "--help"], capture_output=True, text=True, check=True)
    for name in cli.SUBCOMMANDS:
        assert name in out.stdout


_NO_TORCH = """
import sys
from gpucomm.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted(m for m in ("torch", "numpy", "matplotlib", "jinja2") if m in sys.modules)
print("HEAVY:" + ",".join(heavy))
"""


@pytest.mark.parametrize("argv", [["--help"], *([name, "--help"] for name in cli.SUBCOMMANDS)])
def test_help_imports_no_torch(argv):
    """Building every parser and printing any help must not import torch (nor numpy, matplotlib, Jinja2)."""
    out = subprocess.run([sys.executable, "-c", _NO_TORCH, *argv], capture_output=True, text=True, timeout=120)
    heavy = out.stdout.strip().splitlines()[-1]
    assert heavy == "HEAVY:", f"gpucomm {' '.join(argv)} imported {heavy[6:]}"
    assert "usage:" in out.stdout


def _options(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _options(sub)
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield parser.prog, action


def test_every_option_has_help_text():
    missing = [f"{prog} {'/'.join(a.option_strings) or a.dest}" for prog, a in _options(cli.build_parser())
               if not a.help]
    assert not missing, f"options without help: {missing}"


@pytest.mark.parametrize("argv", [
    ["frobnicate"], ["bench", "--no-such-flag"], ["report"], ["topo", "--nope"], ["advise", "--bogus", "1"],
    ["bench", "-n", "many"],
])
def test_usage_errors_are_one_line_and_exit_2(argv, capsys):
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err
    assert "error:" in err[0] and not err[0].startswith("usage:")


def test_unknown_option_names_the_subcommand(capsys):
    assert cli.main(["report", "x", "--zz"]) == 2
    assert capsys.readouterr().err.startswith("gpucomm report: error: unrecognized arguments: --zz")


def test_a_reader_that_leaves_the_pipe_stops_the_command_quietly():
    """``gpucomm … | head``: a BrokenPipeError is no traceback; the status is a shell's for SIGPIPE."""
    code = ("import sys, gpucomm.advisor.cli as c\n"
            "def gone(args): raise BrokenPipeError(32, 'Broken pipe')\n"
            "c.run = gone\n"
            "from gpucomm.cli import main\n"
            "sys.exit(main(['advise', '--list-hardware']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 141 and out.stderr == "", out.stderr
