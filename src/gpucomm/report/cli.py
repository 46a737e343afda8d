"""``gpucomm report``: what bench, train and advise runs found — Markdown and HTML report with plots.

Usage::

    gpucomm report gpucomm-results/bench-20261203-141502-4711    # one run: report into its directory
    gpucomm report BENCH_DIR TRAIN_DIR                           # several runs side by side
    gpucomm report gpucomm-results                               # every run below it, each its own
    gpucomm report --doc docs/ [--check]                         # regenerate (check) docs' measured tables

Reads the records of each DIR (written by ``gpucomm bench``, ``train`` or ``advise``) and writes
``report.md``, ``report.html`` (self-contained: opens from disk, plots inlined) and ``plots/*.png|svg``;
then prints the paths and each run's answer — the findings the report opens with, each kind's in at most
five lines of the terminal (the report has them in full).

Which runs: a DIR that holds records itself is one run; a DIR that holds none itself but has result
directories below it is each of them, in name order (so ``gpucomm-results/`` after six runs is six runs,
never one).  Runs found below a DIR that hold no result rows (stopped before their first row) are
skipped, and the command says which.  Each run is labelled by its env block (hostname, device, torch version,
date).

Where: ``--out OUT``; by default the one run's own directory, or, for several runs, a new
``gpucomm-results/report-<UTC yyyymmdd-hhmmss>-<pid>/`` (never the directory that holds the runs).

``--doc`` regenerates the blocks of docs/*.md marked ``<!-- generated: KIND from benchmarks/results/FILE -->``
from the file each names (:mod:`gpucomm.report.docs` says how to add a kind).

Exit status: 0 written (``--check``: 1 when a block is stale); 2 usage error — a DIR that does not
exist, holds no result rows or a bad line, an OUT that cannot be written: one line on stderr naming
the file and line at fault, and nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``report`` on the ``gpucomm`` sub-parsers."""
    doc = __doc__ or ""
    parser = subparsers.add_parser("report", help="Markdown + HTML report from result directories",
                                   description=doc.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog="\n\n".join(doc.split("\n\n")[1:]))
    parser.add_argument("dirs", nargs="*", metavar="DIR",
                        help="result directory written by gpucomm bench, train or advise, a records.jsonl file, or "
                             "a directory holding result directories (each its own run)")
    parser.add_argument("--out", metavar="OUT", default=None,
                        help="where to write report.md, report.html and plots/ (default: the one run's directory; "
                             "several runs: a new gpucomm-results/report-<UTC time>-<pid>/)")
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
    from gpucomm.report.files import report_dir, write_report
    from gpucomm.report.runs import load_runs

    skipped: list = []
    try:
        runs = load_runs(args.dirs, skipped)
        paths = write_report(runs, report_dir([Path(d) for d in args.dirs], runs, args.out))
    except (RecordError, ValueError, OSError) as exc:
        print(f"gpucomm report: error: {exc}", file=sys.stderr)
        return 2
    plots = [path for name, path in paths.items() if name.startswith("plots/")]
    for name, path in paths.items():
        if not name.startswith("plots/"):
            print(path)
    if plots:
        print(f"plots: {len(plots)} files in {plots[0].parent}")
    if skipped:
        print(f"skipped {len(skipped)} result director{'ies' if len(skipped) != 1 else 'y'} without result rows: "
              f"{', '.join(map(str, skipped))}")
    _print_findings(runs)
    return 0


def _print_findings(runs) -> None:
    """Each run's answer, in the terminal too: what the report opens with, without opening a file."""
    from rich.text import Text

    from gpucomm._console import make_console
    from gpucomm.report.findings import answer_glance
    from gpucomm.report.terminal import Answer

    console = make_console(highlight=False)
    for run in runs:
        if len(runs) > 1:
            console.print(Text(f"{run.tag}: {run.label} — {run.directory}", style="dim"))
        console.print(Answer(lambda width, run=run: answer_glance(run.results, width)))
