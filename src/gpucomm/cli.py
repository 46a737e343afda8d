"""``gpucomm``: move tensors between GPUs, measure it honestly, and choose how to train on several.

Usage::

    gpucomm bench             # collectives side by side: torch.cuda.comm, gpucomm.comm,
                              # torch.distributed and gpucomm.dist
    gpucomm train             # single vs DataParallel vs replicated vs DDP, checked equal and timed
    gpucomm advise --help     # a calibrated cost model that recommends a training layout
    gpucomm topo              # devices, links, CPU/NUMA affinity
    gpucomm report DIR        # Markdown + HTML report from result directories

Each command ends by saying what it found.  ``gpucomm COMMAND --help`` is that command's manual.
Results go to a new directory ``gpucomm-results/<command>-<UTC yyyymmdd-hhmmss>-<pid>/`` unless
``--out`` names one.

Exit status: 0 success; 1 a run failed (wrong results, a floor missed); 2 a usage error, one line on
stderr, nothing written; 130 interrupted.

Each subcommand lives in its own module, which exposes ``add_parser(subparsers)`` and ``run(args)``;
this file only registers them and gives every parser the plain-text help of :mod:`gpucomm._help`.
Building the parsers imports no torch (each ``add_parser`` is torch-free; ``run`` imports what it
needs), so ``gpucomm --help`` answers at once.  Every usage error is one line on stderr —
``gpucomm <cmd>: error: <what>; see gpucomm <cmd> --help`` — with exit status 2: :class:`Parser`
replaces argparse's usage-plus-error form, and the subcommand parsers inherit it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gpucomm import __version__, _help

__all__ = ["SUBCOMMANDS", "Parser", "build_parser", "main"]

SUBCOMMANDS: dict[str, str] = {
    "bench": "gpucomm.bench.cli",
    "train": "gpucomm.train.cli",
    "advise": "gpucomm.advisor.cli",
    "measure": "gpucomm.advisor.compute.cli",
    "topo": "gpucomm.topology",
    "report": "gpucomm.report.cli",
}


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr and exit status 2.

    argparse prints the whole usage block and then the error (two to four lines); the usage is one
    ``--help`` away, so the line names it instead.  ``add_subparsers`` builds its sub-parsers with
    the parent's class, so every subcommand gets this behaviour.
    """

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = Parser(prog="gpucomm", description=__doc__.split("\n\nEach subcommand lives")[0])
    parser.add_argument("--version", action="version", version=f"gpucomm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module_name in SUBCOMMANDS.values():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a subcommand not built yet; any other import error is real
            if exc.name != module_name:
                raise
            continue
        module.add_parser(sub)
    for sub_parser in (parser, *sub.choices.values()):
        _help.install(sub_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns the process exit status."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # say which command did not know them, not the top level
        prog = f"gpucomm {args.command}" if args.command else "gpucomm"
        print(f"{prog}: error: unrecognized arguments: {' '.join(extra)}; see {prog} --help", file=sys.stderr)
        return 2
    if args.command is None:
        print(f"gpucomm: error: a COMMAND is required ({', '.join(SUBCOMMANDS)}); see gpucomm --help",
              file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[args.command])
    try:
        return int(module.run(args) or 0)
    except BrokenPipeError:  # `gpucomm … | head`: the reader left; stop quietly, as cat and grep do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 141  # 128 + SIGPIPE, what a shell reports for a command its pipe stopped


if __name__ == "__main__":
    raise SystemExit(main())
