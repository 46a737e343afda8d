"""``gpucomm report``: Markdown and HTML report (with plots) from result directories.

Usage::

    gpucomm report DIR [DIR ...] [--out OUT]
    gpucomm report --doc docs/ [--check]      # regenerate (or check) the measured tables in docs/*.md

Reads ``records.jsonl`` in each DIR (written by ``gpucomm bench``, ``train`` or ``advise``) and writes
``report.md``, ``report.html`` (self-contained: opens from disk, plots inlined) and ``plots/*.png|svg``
into OUT (and prints the paths, then each run's answer) — by default the single DIR, or ``gpucomm-results/report-<UTC time>/`` when several DIRs are
compared.  Each DIR is
labelled by its env block (hostname, device, torch version, date).  Prints the paths written.

``--doc`` regenerates the blocks of docs/*.md marked ``<!-- generated: KIND from benchmarks/results/FILE -->``
from the file each names (:mod:`gpucomm.report.docs` says how to add one).

Exit status: 0 written (``--check``: 1 when a block is stale); 2 usage error (a DIR that does not exist or holds no valid records, an OUT
that cannot be written): one line on stderr naming the file and line at fault.  Nothing is written on
error.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``report`` on the ``gpucomm`` sub-parsers."""
    doc = __doc__ or ""
    parser = subparsers.add_parser("report", help="Markdown + HTML report from result directories",
                                   description=doc.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog="\n\n".join(doc.split("\n\n")[1:]))
    parser.add_argument("dirs", nargs="*", metavar="DIR",
                        help="result directory written by gpucomm bench, train or advise (or a records.jsonl file)")
    parser.add_argument("--out", metavar="OUT", default=None,
                        help="where to write report.md, report.html and plots/ (default: the single DIR; "
                             "several DIRs: gpucomm-results/report-<UTC time>/)")
    parser.add_argument("--doc", metavar="DOCS", default=None,
                        help="instead of a report: regenerate every generated block in DOCS (a directory of .md "
                             "files, e.g. docs/, or one file) from the results file its marker names")
    parser.add_argument("--check", action="store_true",
                        help="with --doc: rewrite nothing, exit 1 when a generated block is stale")
    return parser


def run(args: argparse.Namespace) -> int:
    """Build the report; print each path written; a bad input is one line on stderr and exit 2."""
    if args.doc is not None:
        if args.dirs:
            print("gpucomm report: error: --doc takes no DIR; run it alone: gpucomm report --doc docs/",
                  file=sys.stderr)
            return 2
        from gpucomm.report.docs import run as run_docs

        return run_docs(args.doc, check_only=args.check)
    if not args.dirs or args.check:
        what = "--check needs --doc" if args.check else "the following arguments are required: DIR (or --doc DOCS)"
        print(f"gpucomm report: error: {what}; see gpucomm report --help", file=sys.stderr)
        return 2
    from gpucomm.records import RecordError
    from gpucomm.report.build import build

    try:
        paths = build(args.dirs, args.out)
    except (RecordError, ValueError, OSError) as exc:
        print(f"gpucomm report: error: {exc}", file=sys.stderr)
        return 2
    plots = [path for name, path in paths.items() if name.startswith("plots/")]
    for name, path in paths.items():
        if not name.startswith("plots/"):
            print(path)
    if plots:
        print(f"plots: {len(plots)} files in {plots[0].parent}")
    _print_findings(args.dirs)
    return 0


def _print_findings(dirs: list[str]) -> None:
    """Each run's answer, in the terminal too: what the report opens with, without opening a file."""
    from rich.console import Console
    from rich.text import Text

    from gpucomm.report.findings import answer
    from gpucomm.report.runs import load_runs
    from gpucomm.report.terminal import Answer

    runs = load_runs(dirs)
    console = Console(highlight=False)
    for run in runs:
        lines = answer(run.results)
        if len(runs) > 1:
            console.print(Text(f"{run.tag}: {run.label}", style="dim"))
        if lines:
            console.print(Answer(lines))
