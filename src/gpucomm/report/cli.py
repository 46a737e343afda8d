"""``gpucomm report``: Markdown and HTML report (with plots) from result directories.

Usage::

    gpucomm report DIR [DIR ...] [--out OUT]

Reads ``records.jsonl`` in each DIR (written by ``gpucomm bench``, ``train`` or ``advise``) and writes
``report.md``, ``report.html`` (self-contained: opens from disk, plots inlined) and ``plots/*.png|svg``
into OUT — by default the single DIR, or ``gpucomm-results/report-<UTC time>/`` when several DIRs are
compared.  Each DIR is
labelled by its env block (hostname, device, torch version, date).  Prints the paths written.

Exit status: 0 written; 2 usage error (a DIR that does not exist or holds no valid records, an OUT
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
    parser.add_argument("dirs", nargs="+", metavar="DIR",
                        help="result directory written by gpucomm bench, train or advise (or a records.jsonl file)")
    parser.add_argument("--out", metavar="OUT", default=None,
                        help="where to write report.md, report.html and plots/ (default: the single DIR; "
                             "several DIRs: gpucomm-results/report-<UTC time>/)")
    return parser


def run(args: argparse.Namespace) -> int:
    """Build the report; print each path written; a bad input is one line on stderr and exit 2."""
    from gpucomm.records import RecordError
    from gpucomm.report.build import build

    try:
        paths = build(args.dirs, args.out)
    except (RecordError, ValueError, OSError) as exc:
        print(f"gpucomm report: error: {exc}", file=sys.stderr)
        return 2
    for path in paths.values():
        print(path)
    return 0
