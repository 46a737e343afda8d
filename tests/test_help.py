"""Plain-text help: every command's ``--help`` reads as plain text in 80 (and 120) columns, examples first."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from gpucomm import _help, cli

_MARKUP = re.compile(r"``|::$|:(?:class|func|mod|meth|data|attr|ref):`|\*\*|^\.\. \w+::")
_CITATIONS = re.compile(r"reference/|\.md §|§\s*\d|not in reference")


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"gpucomm": parser, **{f"gpucomm {name}": p for name, p in sub.choices.items()}}


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("prog", list(_parsers()))
def test_help_is_plain_text_that_fits(prog, columns, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(columns))
    text = _parsers()[prog].format_help()
    problems = [f"line {i} is {len(line)} columns: {line!r}" for i, line in enumerate(text.splitlines(), 1)
                if len(line) > columns]
    problems += [f"line {i} has reST markup: {line!r}" for i, line in enumerate(text.splitlines(), 1)
                 if _MARKUP.search(line.strip())]
    problems += [f"line {i} cites a file users do not have: {line!r}"
                 for i, line in enumerate(text.splitlines(), 1) if _CITATIONS.search(line)]
    assert not problems, f"{prog} --help at COLUMNS={columns}:\n" + "\n".join(problems)


@pytest.mark.parametrize("prog", list(_parsers()))
def test_examples_come_before_the_options(prog, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    lines = _parsers()[prog].format_help().splitlines()
    examples = next((i for i, line in enumerate(lines) if line.startswith("Examples")), None)
    assert examples is not None, (f"{prog} --help has no examples: give its module docstring a 'Usage::' "
                                  f"block of commands after the summary paragraph")
    options = next(i for i, line in enumerate(lines) if line.endswith(":") and not line.startswith(" ")
                   and i > 1 and ("options" in line or "arguments" in line))
    assert examples < options, f"{prog} --help shows its options before its examples"


def test_piped_help_honours_columns():
    """The real command, piped: ``COLUMNS`` decides the width (argparse and the manual alike)."""
    for columns in (60, 100):
        env = {"COLUMNS": str(columns), "PATH": "/usr/bin:/bin"}
        out = subprocess.run([sys.executable, "-m", "gpucomm", "train", "--help"], capture_output=True, text=True,
                             env={**env, "PYTHONPATH": ":".join(sys.path)}, check=True).stdout
        widths = [len(line) for line in out.splitlines()]
        assert max(widths) <= columns and max(widths) > columns - 12, (columns, max(widths))


def test_inline_markup_goes():
    assert _help.plain("``--ops`` and :class:`~gpucomm.records.TrainRecord` in :mod:`gpucomm.report`") == \
        "--ops and TrainRecord in gpucomm.report"
    assert _help.plain(":ref:`the manual <manual>` is **bold** and `interpreted`") == \
        "the manual is bold and interpreted"
    assert _help.plain("plots/*.png|svg stays") == "plots/*.png|svg stays"


def test_render_wraps_lists_with_hanging_indents_and_keeps_literal_blocks():
    doc = """Summary line.

    Strategies:

    * ``single`` — one device (the first of ``--devices``), which is the baseline every other strategy is
      compared with;
    * ``dp``     — ``torch.nn.DataParallel``.

    A paragraph that introduces commands::

        gpucomm train --model gpt-tiny

    .. note::
       A note's body.
    """
    out = _help.render(doc, 60).splitlines()
    assert "Strategies:" in out
    assert out[out.index("Strategies:") + 2] == "* single — one device (the first of --devices), which is the"
    assert out[out.index("Strategies:") + 3].startswith("  baseline")
    assert "* dp — torch.nn.DataParallel." in out
    assert "A paragraph that introduces commands:" in out
    assert "    gpucomm train --model gpt-tiny" in out
    assert "Note: A note's body." in out
    assert all(len(line) <= 60 for line in out)


def test_a_literal_block_inside_a_list_item_ends_where_the_item_text_resumes():
    doc = "Modes:\n\n* **the planner** searches layouts::\n\n    gpucomm advise --gpus 8\n\n  ``--layout`` fixes keys."
    assert _help.render(doc, 80).splitlines() == [
        "Modes:", "", "* the planner searches layouts:", "", "    gpucomm advise --gpus 8", "", "  --layout fixes keys."]


def test_a_command_too_wide_moves_its_comments_up_and_breaks_with_backslashes():
    doc = ("Summary.\n\nUsage::\n\n    gpucomm bench --devices 0,1  # short\n"
           "    gpucomm bench --ops all_reduce,all_gather --backends gpucomm.comm,torch.cuda.comm -d bf16  # long\n"
           "                                                                            # and more")
    out = _help.render(doc, 50).splitlines()
    assert out == ["Summary.", "", "Usage:", "", "    # short", "    gpucomm bench --devices 0,1", "    # long",
                   "    # and more",
                   "    gpucomm bench --ops all_reduce,all_gather \\",
                   "        --backends gpucomm.comm,torch.cuda.comm \\", "        -d bf16"]
    assert all(len(line) <= 50 for line in out)


def test_split_manual_puts_the_first_usage_block_after_the_summary():
    doc = "Summary.\n\nDetails first.\n\nUsage (named)::\n\n    a --x\n\n    b --y\n\nMore details."
    head, rest = _help.split_manual(doc)
    assert head == "Summary.\n\nExamples (named)::\n\n    a --x\n\n    b --y"
    assert rest == "Details first.\n\nMore details."
    assert _help.split_manual(head + "\n\n" + rest) == (head, rest)  # idempotent
    assert _help.split_manual("Only a summary.") == ("Only a summary.", "")
