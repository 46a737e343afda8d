"""What a report says first: one sentence per op and backend pair, and how far the numbers can be trusted.

A reader opens a report to learn which backend is faster, where, by how much — and whether to believe
it.  :func:`pair_sentences` answers the first three from the bench rows' speedups (each row's
baseline median time / its median time, ``gpucomm.bench.backends.BACKENDS`` says which backend is whose
baseline); :func:`trust_sentences` the last: rows with wrong results, rows too noisy to quote, and CPU
numbers.

Which rows a finding uses, and why:

* a row with ``#wrong > 0`` timed an incorrect operation: it is left out;
* a row whose p99 is more than :data:`NOISY` times its median (or whose baseline row's is) had a
  spread so wide that its median-over-median ratio could move by that factor on a rerun: it is left
  out, counted, and named in the trust signals — never presented as a real speedup;
* per size, the median speedup over the remaining rows (placements, types) decides whether the backend
  is faster there; "faster from S up" means faster at S and at every larger size measured.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from gpucomm.records import BenchRecord
from gpucomm.report._format import fmt_bytes, fmt_float
from gpucomm.report.runs import Run

__all__ = ["NOISY", "PairFinding", "is_noisy", "pair_findings", "pair_sentences", "trust_sentences"]

_FORMS = {"plain": 0, "prepared": 1, "graph": 2}

NOISY = 3.0
"""p99 / median above which a row's median is not trusted for a ratio."""


def is_noisy(record: BenchRecord) -> bool:
    """Whether the row's p99 is more than :data:`NOISY` times its median."""
    return record.time_us_median > 0 and record.time_us_p99 > NOISY * record.time_us_median


def _point(r: BenchRecord, backend: str, form: str) -> tuple:
    return (r.op, backend, form, r.size, r.dtype, r.reduce_op, r.n, r.placement, r.timing)


@dataclass(frozen=True, slots=True)
class PairFinding:
    """One op and backend pair of one run, summarised from its trusted rows."""

    run: int
    op: str
    backend: str
    form: str
    """"plain", "prepared" or "graph" (``BenchRecord.form``)."""
    baseline: str
    rows: int
    """Rows with a ratio (before leaving any out)."""
    wrong: int
    noisy: int
    by_size: tuple[tuple[int, float], ...]
    """(size, median speedup over the trusted rows at that size), ascending size."""

    @property
    def faster_from(self) -> int | None:
        """The smallest size from which the backend is faster at every measured size; None if never."""
        start = None
        for size, speedup in reversed(self.by_size):
            if speedup < 1.0:
                break
            start = size
        return start

    def sentence(self, prefix: str = "") -> str:
        """The finding in words, e.g. "gather: gpucomm.comm is 34.10x torch.cuda.comm's speed from 1 MiB up"."""
        form = "" if self.form == "plain" else f" ({self.form})"
        head = f"{prefix}{self.op}: {self.backend}{form} vs {self.baseline}"
        left_out = self._left_out()
        if not self.by_size:
            return f"{head}: no trustworthy ratio ({left_out or 'no rows'})."
        speedups = [s for _, s in self.by_size]
        sizes = [z for z, _ in self.by_size]
        start = self.faster_from
        if start == sizes[0]:
            where, quoted = "at every size measured", speedups
        elif start is not None:
            where, quoted = f"from {fmt_bytes(start)} up, slower below", [s for z, s in self.by_size if z >= start]
        elif max(speedups) < 1.0:
            where, quoted = "at every size measured", speedups
        else:
            faster = sum(s >= 1.0 for s in speedups)
            where, quoted = (f"overall, faster at {faster} of {len(speedups)} sizes but at no size beyond which "
                             f"it stays faster"), speedups
        median = statistics.median(quoted)
        verb = "faster" if median >= 1.0 else "slower"
        factor = median if median >= 1.0 else 1.0 / median
        count = f"{len(quoted)} size" + ("s" if len(quoted) != 1 else "")
        text = (f"{head}: {fmt_float(factor)}x {verb} {where} (median speedup {fmt_float(median)}x over "
                f"{count}, range {fmt_float(min(quoted))}–{fmt_float(max(quoted))}x)")
        return text + (f"; {left_out}" if left_out else "") + "."

    def _left_out(self) -> str:
        parts = []
        if self.wrong:
            parts.append(f"{self.wrong} wrong row(s) left out")
        if self.noisy:
            parts.append(f"{self.noisy} noisy row(s) left out (p99 > {NOISY:g}x median)")
        return ", ".join(parts)


def _baseline(r: BenchRecord) -> str | None:
    from gpucomm.bench.backends import BACKENDS

    known = BACKENDS.get(r.backend)
    return known.baseline if known is not None else (r.baseline if r.baseline != r.backend else None)


def pair_findings(runs: Sequence[Run]) -> list[PairFinding]:
    """Every (run, op, backend with a baseline) pair, in run, collective and backend display order."""
    from gpucomm import collectives
    from gpucomm.bench.backends import BACKENDS

    out = []
    for i, run in enumerate(runs):
        rows = run.results.bench
        index = {_point(r, r.backend, r.form): r for r in rows}
        pairs: dict[tuple[str, str, str, str], list[BenchRecord]] = defaultdict(list)
        for r in rows:
            base = _baseline(r)
            if base is not None and r.speedup is not None:
                pairs[(r.op, r.backend, r.form, base)].append(r)

        def order(key: tuple[str, str, str, str]) -> tuple:
            op, backend, form, _ = key
            op_order = collectives.get(op).order if op in collectives.names() else 1 << 30
            b = BACKENDS.get(backend)
            return (op_order, op, b.order if b is not None else 1 << 30, backend, _FORMS.get(form, 9), form)

        for op, backend, form, base in sorted(pairs, key=order):
            group = pairs[(op, backend, form, base)]
            wrong = [r for r in group if r.wrong > 0]
            noisy = [r for r in group if r.wrong <= 0 and (is_noisy(r) or _baseline_noisy(r, base, index))]
            trusted = [r for r in group if r not in wrong and r not in noisy]
            per_size: dict[int, list[float]] = defaultdict(list)
            for r in trusted:
                per_size[r.size].append(r.speedup)
            by_size = tuple((z, statistics.median(v)) for z, v in sorted(per_size.items()))
            out.append(PairFinding(i, op, backend, form, base, len(group), len(wrong), len(noisy), by_size))
    return out


def _baseline_noisy(r: BenchRecord, base: str, index: dict[tuple, BenchRecord]) -> bool:
    other = index.get(_point(r, base, "plain"))  # every form's ratio divides by the baseline's plain call
    return other is not None and (is_noisy(other) or other.wrong > 0)


def pair_sentences(runs: Sequence[Run]) -> list[str]:
    """One sentence per op and backend pair (prefixed by the run's tag when several runs are compared)."""
    multi = len(runs) > 1
    sentences = []
    for f in pair_findings(runs):
        run = runs[f.run]
        prefix = (f"[{run.tag}] " if multi else "") + ("CPU, " if run.is_cpu else "")
        sentences.append(f.sentence(prefix))
    return sentences


def trust_sentences(runs: Sequence[Run], limit: int = 5) -> list[tuple[str, str]]:
    """(tone, sentence) pairs: wrong rows, noisy rows (the worst few named), CPU-only numbers."""
    rows = [(run, r) for run in runs for r in run.results.bench]
    out: list[tuple[str, str]] = []
    if not rows:
        return out
    wrong = [r for _, r in rows if r.wrong > 0]
    checked = sum(1 for _, r in rows if r.wrong >= 0)
    if wrong:
        out.append(("warning", f"{len(wrong)} of {len(rows)} rows returned WRONG results; they are left out of "
                               f"every finding above (see Wrong results)."))
    else:
        out.append(("ok", f"Every checked row is correct ({checked} of {len(rows)} rows checked)."))
    noisy = sorted((r for _, r in rows if is_noisy(r)), key=lambda r: -r.time_us_p99 / r.time_us_median)
    if noisy:
        named = "; ".join(f"{r.backend} {r.op} {fmt_bytes(r.size)} {r.placement} (p99 "
                          f"{fmt_float(r.time_us_p99 / r.time_us_median, 1)}x median)" for r in noisy[:limit])
        more = f", and {len(noisy) - limit} more" if len(noisy) > limit else ""
        out.append(("warning", f"{len(noisy)} of {len(rows)} rows are too noisy to quote (p99 more than "
                               f"{NOISY:g}x the median); their speedups, and those of the rows compared with "
                               f"them, are left out of the findings: {named}{more}."))
    else:
        out.append(("ok", f"No row's p99 exceeds {NOISY:g}x its median: the speedups above are stable."))
    cpu = [run for run in runs if run.is_cpu and run.results.bench]
    if cpu:
        which = "every run" if len(cpu) == len({id(run) for run, _ in rows}) else ", ".join(r.tag for r in cpu)
        out.append(("warning", f"CPU numbers ({which}): measured on CPU tensors and gloo, not on GPUs; they "
                               f"show correctness and host overheads, not GPU performance."))
    return out
