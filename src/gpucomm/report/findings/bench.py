"""What a bench run found: per op and backend pair, which is faster, by how much, where — and how far to trust it.

A pair is a backend and form ("gpucomm.dist", "prepared") against its baseline's plain call
(``gpucomm.bench.backends.BACKENDS`` says whose baseline is whose); its speedup at a size is the
baseline's median time / the backend's median time (> 1 = faster).

Which rows a finding uses, and why:

* a row with ``#wrong > 0`` timed an incorrect operation: it is left out;
* a row whose p99 is more than :data:`NOISY` times its median (or whose baseline row's is) had a
  spread so wide that its median-over-median ratio could move by that factor on a rerun: it is left
  out, counted, and named in the trust signals — never presented as a real speedup;
* per size, the median speedup over the remaining rows (placements, types) decides whether the backend
  is faster there; "faster from S up" means faster at S and at every larger size measured;
* speedups within :data:`EVEN` of 1 at every size are "on par": a difference that small is not an answer.

:func:`bench_answer` says it in at most five lines — what ``gpucomm bench`` ends with and what a report
opens with; :meth:`PairFinding.sentence` is the longer form, one sentence per pair, for the report's detail.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from gpucomm import collectives
from gpucomm.bench.backends import BACKENDS
from gpucomm.records import BenchRecord
from gpucomm.report._format import fmt_bytes, fmt_speedup
from gpucomm.report.findings import glance
from gpucomm.report.runs import Run

__all__ = [
    "EVEN",
    "NOISY",
    "PairFinding",
    "bench_answer",
    "bench_findings",
    "bench_glance",
    "is_noisy",
    "noisy_rows",
    "pair_findings",
    "pair_sentences",
    "trust_sentences",
]

NOISY = 3.0
"""p99 / median above which a row's median is not trusted for a ratio."""

EVEN = 0.03
"""Speedups within this fraction of 1 (0.97x–1.03x) at every size are "on par", not faster or slower."""

_FORMS = {"plain": 0, "prepared": 1, "graph": 2}


def is_noisy(record: BenchRecord) -> bool:
    """Whether the row's p99 is more than :data:`NOISY` times its median."""
    return record.time_us_median > 0 and record.time_us_p99 > NOISY * record.time_us_median


def _point(r: BenchRecord, backend: str, form: str) -> tuple:
    return (r.op, backend, form, r.size, r.dtype, r.reduce_op, r.n, r.placement, r.timing)


def _baseline(r: BenchRecord) -> str | None:
    known = BACKENDS.get(r.backend)
    return known.baseline if known is not None else (r.baseline if r.baseline != r.backend else None)


def noisy_rows(records: Sequence[BenchRecord]) -> set[int]:
    """Indices of the rows whose ratio is not trusted: noisy themselves, or compared with a noisy or wrong
    baseline row (every form's ratio divides by the baseline's plain call)."""
    index = {_point(r, r.backend, r.form): r for r in records}
    out = set()
    for i, r in enumerate(records):
        base = _baseline(r)
        other = index.get(_point(r, base, "plain")) if base is not None else None
        if is_noisy(r) or (other is not None and (is_noisy(other) or other.wrong > 0)):
            out.add(i)
    return out


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
    untrusted_by_size: tuple[tuple[int, float], ...] = ()
    """(size, median speedup over the noisy rows) at the sizes with no trusted row: drawn, marked, never quoted."""

    @property
    def pair(self) -> str:
        """"gpucomm.dist vs torch.distributed", "gpucomm.dist prepared vs torch.distributed"."""
        form = "" if self.form == "plain" else f" {self.form}"
        return f"{self.backend}{form} vs {self.baseline}"

    @property
    def faster_from(self) -> int | None:
        """The smallest size from which the backend is faster at every measured size; None if never."""
        start = None
        for size, speedup in reversed(self.by_size):
            if speedup < 1.0:
                break
            start = size
        return start

    @property
    def verdict(self) -> str:
        """"faster", "faster from" (from a size up, slower below), "slower", "on par", "mixed" or "unknown"
        (no trusted row).

        A difference within :data:`EVEN` is no answer: "on par" when every size is within it, or when the
        backend is faster (slower) at every size but its median speedup is within it; "mixed" when it is
        faster only from a size up and by no more than that there.
        """
        speedups = [s for _, s in self.by_size]
        if not speedups:
            return "unknown"
        if all(abs(s - 1.0) <= EVEN for s in speedups):
            return "on par"
        start = self.faster_from
        if start == self.by_size[0][0]:
            return "faster" if statistics.median(speedups) > 1.0 + EVEN else "on par"
        if start is not None:
            above = statistics.median(s for z, s in self.by_size if z >= start)
            return "faster from" if above > 1.0 + EVEN else "mixed"
        if max(speedups) < 1.0:
            return "slower" if statistics.median(speedups) < 1.0 - EVEN else "on par"
        return "mixed"

    @property
    def quoted(self) -> tuple[tuple[int, float], ...]:
        """The (size, speedup) points the headline number is the median of: every trusted size, or those
        from :attr:`faster_from` up."""
        start = self.faster_from if self.verdict == "faster from" else None
        return tuple((z, s) for z, s in self.by_size if start is None or z >= start)

    @property
    def speedup(self) -> float | None:
        """The one number: the median speedup over :attr:`quoted`; None without a trusted row."""
        return statistics.median(s for _, s in self.quoted) if self.by_size else None

    def phrase(self, below: bool = True) -> str:
        """The op in a few words, for the answer: "gather 1.36x", "gather 35.00x from 1 MiB up (0.80x below)"
        (``below=False``: without the parenthesis), "broadcast 0.84–1.02x"."""
        if self.speedup is None:
            return self.op
        if self.verdict == "mixed":
            speedups = [s for _, s in self.by_size]
            return f"{self.op} {fmt_speedup(min(speedups))[:-1]}–{fmt_speedup(max(speedups))}"
        text = f"{self.op} {fmt_speedup(self.speedup)}"
        if self.verdict == "faster from":
            text += f" from {fmt_bytes(self.faster_from)} up"
            if below:
                under = statistics.median(s for z, s in self.by_size if z < self.faster_from)
                text += f" ({fmt_speedup(under)} below)"
        return text

    def sentence(self, prefix: str = "") -> str:
        """The finding in one sentence, e.g. "gather, gpucomm.comm vs torch.cuda.comm: faster from 1 MiB up,
        slower below — median speedup 35.00x there (30.00–40.00x over 2 sizes); 1 noisy row left out."."""
        head = f"{prefix}{self.op}, {self.pair}"
        left_out = self._left_out()
        if self.speedup is None:
            return f"{head}: no trustworthy ratio ({left_out or 'no rows'})."
        sizes = [z for z, _ in self.by_size]
        where = {"faster": "faster at every size measured", "slower": "slower at every size measured",
                 "on par": f"on par (within {EVEN:.0%}) at every size measured",
                 "faster from": f"faster from {fmt_bytes(self.faster_from)} up, slower below",
                 "mixed": f"faster at {sum(s >= 1.0 for _, s in self.by_size)} of {len(sizes)} sizes, "
                          f"slower at the others"}[self.verdict]
        quoted = [s for _, s in self.quoted]
        there = " there" if self.verdict == "faster from" else ""
        spread = (f" ({fmt_speedup(min(quoted))[:-1]}–{fmt_speedup(max(quoted))} over {len(quoted)} sizes)"
                  if len(quoted) > 1 else f" (at {fmt_bytes(self.quoted[0][0])})")
        text = f"{head}: {where} — median speedup {fmt_speedup(self.speedup)}{there}{spread}"
        return text + (f"; {left_out}" if left_out else "") + "."

    def _left_out(self) -> str:
        parts = []
        if self.wrong:
            parts.append(f"{self.wrong} wrong row{'s' * (self.wrong != 1)} left out")
        if self.noisy:
            parts.append(f"{self.noisy} noisy row{'s' * (self.noisy != 1)} left out (p99 > {NOISY:g}x median)")
        return ", ".join(parts)


def _order(op: str, backend: str, form: str) -> tuple:
    op_order = collectives.get(op).order if op in collectives.names() else 1 << 30
    b = BACKENDS.get(backend)
    return (op_order, op, b.order if b is not None else 1 << 30, backend, _FORMS.get(form, 9), form)


def bench_findings(records: Sequence[BenchRecord], run: int = 0) -> list[PairFinding]:
    """Every (op, backend with a baseline, form) of one run's bench rows, in collective and backend order."""
    records = list(records)
    untrusted = noisy_rows(records)
    pairs: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        base = _baseline(r)
        if base is not None and r.speedup is not None:
            pairs[(r.op, r.backend, r.form, base)].append(i)
    out = []
    for key in sorted(pairs, key=lambda k: _order(*k[:3])):
        group = pairs[key]
        wrong = [i for i in group if records[i].wrong > 0]
        noisy = [i for i in group if records[i].wrong <= 0 and i in untrusted]
        per_size: dict[int, list[float]] = defaultdict(list)
        noisy_size: dict[int, list[float]] = defaultdict(list)
        for i in group:
            if i not in wrong:
                (noisy_size if i in noisy else per_size)[records[i].size].append(records[i].speedup)
        by_size = tuple((z, statistics.median(v)) for z, v in sorted(per_size.items()))
        loose = tuple((z, statistics.median(v)) for z, v in sorted(noisy_size.items()) if z not in per_size)
        out.append(PairFinding(run, *key, rows=len(group), wrong=len(wrong), noisy=len(noisy), by_size=by_size,
                               untrusted_by_size=loose))
    return out


# ----- the answer ---------------------------------------------------------------------------------------------
_GROUPS = (("faster at", ("faster", "faster from")), ("slower at", ("slower",)), ("on par at", ("on par",)),
           ("mixed at", ("mixed",)), ("too noisy at", ("unknown",)))
_NAMED = ("faster at", "slower at")
"""The groups whose ops a condensed answer names (by how much); the others it counts."""


def _groups(found: list[PairFinding]) -> list[tuple[str, list[PairFinding]]]:
    """(label, ops) of each verdict group with members, strongest first within faster, slower and mixed."""
    out = []
    for label, verdicts in _GROUPS:
        members = [f for f in found if f.verdict in verdicts]
        if label in ("faster at", "mixed at"):
            members.sort(key=lambda f: -(f.speedup or 0.0))
        elif label == "slower at":
            members.sort(key=lambda f: f.speedup or 0.0)
        if members:
            out.append((label, members))
    return out


def _verdicts(found: list[PairFinding], named: int | None) -> str:
    """One pair's ops by verdict: "faster at …; slower at …" with every op's number (``named=None``), or
    counted, with the first ``named`` faster and slower ops named: "faster at 3 of 10 ops (scatter 1.13x, …),
    slower at 3 (reduce 0.86x, …), mixed at 4"; ``named=0``: their speedups' range instead ("faster at 3 of
    10 ops (1.09–1.13x)"); ``named=-1``: counts alone."""
    if named is None:
        return "; ".join(f"{group} " + ", ".join(f.phrase() for f in members) for group, members in _groups(found))
    parts, total = [], len(found)
    for group, members in _groups(found):
        count = f"all {total} ops" if len(members) == total > 1 else str(len(members))
        if not parts and len(members) < total:
            count += f" of {total} op{'s' * (total != 1)}"
        shown = ""
        if group in _NAMED and named > 0:
            more = ", …" if len(members) > named else ""
            shown = f" ({', '.join(f.phrase(below=False) for f in members[:named])}{more})"
        elif group in _NAMED and named == 0:
            speedups = [x.speedup for x in members]
            low, high = fmt_speedup(min(speedups)), fmt_speedup(max(speedups))
            shown = f" ({low})" if low == high else f" ({low[:-1]}–{high})"
        parts.append(f"{group} {count}{shown}")
    return ", ".join(parts)


def _noisy(found: list[PairFinding], full: bool) -> str:
    rows, noisy = sum(f.rows for f in found), sum(f.noisy for f in found)
    return "" if not noisy else f" ({noisy} of {rows} rows {'left out as ' * full}noisy)"


def _pair_line(found: list[PairFinding], named: int | None = None, baseline: bool = True) -> str:
    """One backend pair over every op (:func:`_verdicts`), and how many of its rows were too noisy;
    ``baseline=False`` leaves " vs <baseline>" out of the label."""
    label = found[0].pair if baseline else found[0].pair.split(" vs ")[0]
    return f"{label}: {_verdicts(found, named)}{_noisy(found, named is None)}"


def _backend_lines(pairs: list[list[PairFinding]], named: int | None, baseline: bool) -> list[str]:
    """One line per backend, its forms after each other: "gpucomm.comm vs torch.cuda.comm: …; prepared: …"."""
    by_backend: dict[str, list[list[PairFinding]]] = defaultdict(list)
    for found in pairs:
        by_backend[found[0].backend].append(found)
    lines = []
    for forms in by_backend.values():
        first = forms[0][0].pair if baseline else forms[0][0].pair.split(" vs ")[0]
        parts = [f"{first if k == 0 else found[0].form}: {_verdicts(found, named)}" for k, found in enumerate(forms)]
        lines.append("; ".join(parts) + _noisy([f for found in forms for f in found], named is None))
    return lines


def _unpaired(records: Sequence[BenchRecord]) -> list[str]:
    """Backends measured without their baseline in the run (torch.cuda.comm needs CUDA): no ratio to give."""
    present = {r.backend for r in records}
    types = {r.device_type for r in records}
    lines = []
    for name in sorted(present, key=lambda b: BACKENDS[b].order if b in BACKENDS else 1 << 30):
        b = BACKENDS.get(name)
        if b is None or b.baseline is None or b.baseline in present:
            continue
        base = BACKENDS.get(b.baseline)
        why = (f"runs on {base.device_type.upper()} only" if base is not None and base.device_type is not None
               and base.device_type not in types else "did not run")
        lines.append(f"{name}: no speedup (its baseline, {b.baseline}, {why})")
    return lines


def _trust_line(records: Sequence[BenchRecord], short: bool = False) -> str:
    """How far the lines after it can be trusted: rows checked, WRONG, noisy, CPU numbers (``short``: fewer
    words, the same facts)."""
    checked = sum(1 for r in records if r.wrong >= 0)
    wrong = sum(1 for r in records if r.wrong > 0)
    noisy = sum(1 for r in records if is_noisy(r))
    cpu = any(r.device_type == "cpu" for r in records)
    rows = f"{len(records)} row{'s' * (len(records) != 1)}, "
    parts = [rows + (f"{wrong} WRONG (left out)" if wrong else "all checked correct" if checked else "none checked")]
    if short:
        parts = [f"{len(records)} row{'s' * (len(records) != 1)} "
                 + (f"({wrong} WRONG)" if wrong else "correct" if checked else "unchecked")]
    if noisy:
        parts.append(f"{noisy} too noisy" + (f" (p99 > {NOISY:g}x median)" if short else
                                             f" to quote (p99 > {NOISY:g}x median: rerun on a quiet machine)"))
    if cpu:
        parts.append("CPU numbers" if short else "CPU numbers, not GPU performance")
    return "answer: " + "; ".join(parts)


def _pairs(records: list[BenchRecord]) -> list[list[PairFinding]]:
    """The run's findings grouped by backend pair (backend, form, baseline), in backend and form order."""
    found = bench_findings(records)
    by_pair: dict[tuple[str, str, str], list[PairFinding]] = defaultdict(list)
    for f in found:
        by_pair[(f.backend, f.form, f.baseline)].append(f)
    return [by_pair[k] for k in sorted(by_pair, key=lambda k: _order("", k[0], k[1])[2:])]


def bench_answer(records: Iterable[BenchRecord]) -> list[str]:
    """What a bench run found, in full: the report's answer (the terminal gets :func:`bench_glance`).

    The first line says how far to trust it (rows checked, WRONG, noisy, CPU numbers); then one line per
    backend pair: the ops where it is faster, slower, on par, mixed and too noisy to say, each with its
    speedup and, where it is faster only from a size up, that size; then the backends whose baseline did not
    run.
    """
    records = list(records)
    if not records:
        return []
    return [_trust_line(records)] + [_pair_line(p) for p in _pairs(records)] + _unpaired(records)


_LEVELS = tuple((named, baseline) for named in (None, 3, 2, 1, 0, -1) for baseline in (True, False))
"""The pair lines' levels of detail, most first: (ops named per group — None every op, 0 the range of their
speedups, -1 counts alone — and whether the baseline is named)."""


def bench_glance(records: Iterable[BenchRecord], width: int, *, more: str | None = "report.md",
                 max_lines: int = glance.MAX_LINES) -> list[str]:
    """What a bench run found, in at most ``max_lines`` screen lines at ``width`` columns: ``gpucomm bench``'s
    last lines.

    The same findings as :func:`bench_answer`, at the most detail that fits: the trust line, then per backend
    pair every op with its speedup, or — when that is too long — how many ops are faster, slower, on par,
    mixed and too noisy, the best few faster and slower ones named with their speedup and the size they are
    faster from, and how many rows were too noisy; the forms of one backend share a line when that saves
    one.  When the answer is condensed, ``more`` (the report's file; None when none was written) is named
    for each op's detail; pairs that find no room at all are counted and left to it.
    """
    records = list(records)
    if not records:
        return []
    pairs = _pairs(records)
    trusts = (_trust_line(records), _trust_line(records, short=True))
    unpaired = _unpaired(records)
    pointer = [f"each op, size and noisy row: {more}, Findings"] if more else []

    def candidates() -> Iterator[list[str]]:
        for named, baseline in _LEVELS:
            for body in ([_pair_line(p, named, baseline) for p in pairs], _backend_lines(pairs, named, baseline)):
                for trust in trusts:
                    head = [trust, *body]
                    if named is None:
                        yield from (head + unpaired, head + pointer, head)
                        continue
                    yield from (head + pointer + unpaired, head + pointer)
                    if more:  # a condensed answer says where the rest is
                        yield head[:-1] + [f"{head[-1]}; each op: {more}"]
                    else:
                        yield head
        body = _backend_lines(pairs, *_LEVELS[-1])
        for keep in range(len(body) - 1, 0, -1):
            rest = len(body) - keep
            where = f": {more}" if more else ""
            yield [trusts[1], *body[:keep - 1],
                   f"{body[keep - 1]} (and {rest} more backend{'s' * (rest != 1)}{where})"]

    return glance.fit(candidates(), width, max_lines)


# ----- several runs (the report) -------------------------------------------------------------------------------
def pair_findings(runs: Sequence[Run]) -> list[PairFinding]:
    """Every run's :func:`bench_findings`, run by run."""
    return [f for i, run in enumerate(runs) for f in bench_findings(run.results.bench, i)]


def pair_sentences(runs: Sequence[Run]) -> list[str]:
    """One sentence per op and backend pair with a trusted ratio (prefixed by the run's tag when several runs
    are compared), then one sentence naming every pair and op without one (all its rows noisy or wrong)."""
    found = pair_findings(runs)
    multi = len({f.run for f in found}) > 1  # tag sentences only when several runs have bench rows
    out = [f.sentence(f"[{runs[f.run].tag}] " if multi else "") for f in found if f.speedup is not None]
    unknown: dict[str, list[str]] = defaultdict(list)
    for f in found:
        if f.speedup is None:
            unknown[(f"[{runs[f.run].tag}] " if multi else "") + f.pair].append(f.op)
    if unknown:
        out.append("No trustworthy ratio (every row too noisy or wrong): "
                   + "; ".join(f"{pair} at {', '.join(ops)}" for pair, ops in unknown.items()) + ".")
    return out


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
                               f"every finding (see Wrong results)."))
    else:
        out.append(("ok", f"Every checked row is correct ({checked} of {len(rows)} rows checked)."))
    noisy = sorted((r for _, r in rows if is_noisy(r)), key=lambda r: -r.time_us_p99 / r.time_us_median)
    if noisy:
        named = "; ".join(f"{r.backend} {r.op} {fmt_bytes(r.size)} {r.placement} (p99 "
                          f"{r.time_us_p99 / r.time_us_median:.1f}x median)" for r in noisy[:limit])
        more = f", and {len(noisy) - limit} more" if len(noisy) > limit else ""
        out.append(("warning", f"{len(noisy)} of {len(rows)} rows are too noisy to quote (p99 more than "
                               f"{NOISY:g}x the median); their speedups, and those of the rows compared with "
                               f"them, are left out of the findings: {named}{more}."))
    else:
        out.append(("ok", f"No row's p99 exceeds {NOISY:g}x its median: the speedups are stable."))
    cpu = [run for run in runs if run.is_cpu and run.results.bench]
    if cpu:
        which = "every run" if len(cpu) == len({id(run) for run, _ in rows}) else ", ".join(r.tag for r in cpu)
        out.append(("warning", f"CPU numbers ({which}): measured on CPU tensors and gloo, not on GPUs; they "
                               f"show correctness and host overheads, not GPU performance."))
    return out
