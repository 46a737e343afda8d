"""``gpucomm report --doc DOCS [--check]`` and ``python -m gpucomm.report.docs [DOCS] [--check] [--kinds]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpucomm.report.docs.engine import check, regenerate
from gpucomm.report.docs.kinds import KINDS
from gpucomm.report.docs.spec import DocError

__all__ = ["main", "run"]


def _docs(target: Path) -> list[Path]:
    return sorted(target.glob("*.md")) if target.is_dir() else [target]


def run(target: str | Path = "docs", *, check_only: bool = False) -> int:
    """Regenerate (or, with ``check_only``, check) every generated block under ``target``; exit status."""
    target = Path(target)
    if not target.exists():
        print(f"gpucomm report: error: --doc {str(target)!r} does not exist; pass the docs/ directory or a .md file",
              file=sys.stderr)
        return 2
    problems: list[str] = []
    try:
        for doc in _docs(target):
            if check_only:
                problems += check(doc)
            elif regenerate(doc):
                print(f"regenerated {doc}")
    except DocError as exc:
        print(f"gpucomm report: error: {exc}", file=sys.stderr)
        return 2
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m gpucomm.report.docs [DOCS] [--check] [--kinds]``."""
    parser = argparse.ArgumentParser(prog="python -m gpucomm.report.docs",
                                     description="Regenerate (or check) the measured tables in docs/*.md from "
                                                 "the results files their markers name.")
    parser.add_argument("target", nargs="?", default="docs", help="docs directory or one .md file (default docs)")
    parser.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 when a block is stale")
    parser.add_argument("--kinds", action="store_true", help="list the block kinds and what each reads")
    args = parser.parse_args(argv)
    if args.kinds:
        width = max(map(len, KINDS))
        for name, kind in KINDS.items():
            print(f"{name:{width}}  {kind.reads}")
        return 0
    return run(args.target, check_only=args.check)
