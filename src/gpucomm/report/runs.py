"""Result directories as labelled runs: what a report compares.

A report reads one or more result directories.  Each becomes a :class:`Run`: the records
:func:`gpucomm.records.load` read from it and a label made from its env block — hostname, device name,
torch version and date — so that a report comparing two machines or two versions says which row came
from which.  Two runs whose env blocks give the same label are told apart by directory name, then by
position.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpucomm.records import EnvRecord, RecordError, ResultSet, load

__all__ = ["Run", "device_name", "load_runs", "run_label"]


@dataclass(slots=True)
class Run:
    """One result directory: its records, its label, and the short tag tables and plots use for it."""

    label: str
    """``hostname · device · torch version · date``, made distinct among the runs of one report."""
    directory: Path
    results: ResultSet
    tag: str = "run 1"
    """"run 1", "run 2", …: what a table's run column and a plot legend say (the Runs section maps
    each tag to its label)."""

    @property
    def env(self) -> EnvRecord | None:
        """The first env block (the run's machine and versions); None for a directory without one."""
        return self.results.env[0] if self.results.env else None

    @property
    def is_cpu(self) -> bool:
        """Whether any of this run's measured numbers (bench or train rows) were taken on CPU.

        Advice and scale rows are predictions, not measurements, so they never make a run "CPU numbers".
        """
        r = self.results
        return any(x.device_type == "cpu" for x in (*r.bench, *r.train))


def device_name(env: EnvRecord) -> str:
    """The device a run used: "2x NVIDIA H200"; "CPU" for a CPU run.

    An env block without devices on a non-CPU run is an ``advise`` prediction (the advisor leaves the
    devices out: the machine it ran on is not the one it describes); its hardware profile is named
    when the env block's ``extra["advise"]["hardware"]`` says it.
    """
    if env.device_type == "cpu":
        return "CPU"
    if not env.devices:
        advise = env.extra.get("advise")
        hardware = advise.get("hardware") if isinstance(advise, dict) else None
        return f"prediction for {hardware}" if hardware else "no devices recorded"
    names = Counter(str(d.get("name", "?")) for d in env.devices)
    return ", ".join(f"{count}x {name}" for name, count in names.items())


def run_label(env: EnvRecord | None) -> str:
    """``hostname · device · torch version · date`` from an env block ("unknown run" without one)."""
    if env is None:
        return "unknown run"
    host = str(env.host.get("hostname", "?"))
    torch = str(env.versions.get("torch", "?"))
    return f"{host} · {device_name(env)} · torch {torch} · {env.created[:10]}"


def _distinct(labels: list[str], directories: list[Path]) -> list[str]:
    if len(set(labels)) == len(labels):
        return labels
    counts = Counter(labels)
    labels = [f"{lab} ({d.name})" if counts[lab] > 1 else lab for lab, d in zip(labels, directories, strict=True)]
    if len(set(labels)) == len(labels):
        return labels
    return [f"{lab} [#{i}]" for i, lab in enumerate(labels, 1)]


def load_runs(result_dirs: Sequence[str | os.PathLike[str]]) -> list[Run]:
    """Load each result directory (or records file) as a labelled :class:`Run`.

    Raises:
        ValueError: no directory given.
        RecordError: a directory that does not exist, holds no records, or holds a bad line.
    """
    if isinstance(result_dirs, str | os.PathLike):
        result_dirs = [result_dirs]
    if not result_dirs:
        raise ValueError("result_dirs: expected at least one result directory, but got none; "
                         "pass the --out directory of a gpucomm bench/train/advise run")
    directories = [Path(d) for d in result_dirs]
    results = [load(d) for d in directories]
    for d, r in zip(directories, results, strict=True):
        if not (r.bench or r.train or r.advice or r.scale or r.env):
            raise RecordError(f"{str(d)!r} holds no records; pass a gpucomm result directory")
    labels = _distinct([run_label(r.env[0] if r.env else None) for r in results], directories)
    return [Run(label, d, r, tag=f"run {i}")
            for i, (label, d, r) in enumerate(zip(labels, directories, results, strict=True), 1)]
