"""The report's first section, Findings: what a person reads in ten seconds, then the detail it rests on.

In order:

1. **the answer** of each run (:func:`gpucomm.report.findings.answer`): how far to trust the bench
   numbers and, per backend pair, which ops are faster and by how much; the train strategy to pick and
   the equality verdict; the advisor's recommendation — the same lines the commands end with;
2. **the summary table** (bench runs): one row per op, one column per backend pair and form, each cell one
   speedup with its verdict, where it holds and how many rows it rests on;
3. **the headline plots**: speedup against size, one small panel per op (:func:`gpucomm.report.plots.headline_plot`),
   and training throughput and scaling efficiency per strategy (:func:`gpucomm.report.plots.train_plot`);
4. **detail**: one sentence per op and pair, and the trust signals (which rows were too noisy, CPU numbers).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucomm.report import plots
from gpucomm.report._format import MISSING, fmt_bytes, fmt_speedup
from gpucomm.report.document import Answer, Paragraph, Section, Table
from gpucomm.report.findings import PairFinding, answer, pair_findings, pair_sentences, trust_sentences
from gpucomm.report.runs import Run

__all__ = ["findings_section", "summary_table"]

_TONE = {"faster": "good", "faster from": "good", "slower": "bad", "on par": "even", "mixed": "even",
         "unknown": "muted"}
_FORMS = ("plain", "prepared", "graph")
_HEAD = "answer: "  # bench_answer's first line: how far the lines after it can be trusted


def _cell(f: PairFinding) -> tuple[str, str]:
    """(text, tone) of one summary cell: "1.36x faster\\nall sizes · ✓ 6/6 rows"."""
    trusted = f.rows - f.wrong - f.noisy
    left = ", ".join(p for p in (f"{f.noisy} noisy" if f.noisy else "", f"{f.wrong} WRONG" if f.wrong else "") if p)
    trust = f"✓ {trusted}/{f.rows} rows" if not left else f"⚠ {trusted}/{f.rows} rows ({left})"
    if f.speedup is None:
        return f"too noisy to say\n{trust}", "muted"
    if f.verdict == "mixed":
        speedups = [s for _, s in f.by_size]
        first = f"{fmt_speedup(min(speedups))[:-1]}–{fmt_speedup(max(speedups))} mixed"
        where = f"faster at {sum(s >= 1.0 for s in speedups)} of {len(speedups)} sizes"
    else:
        first = f"{fmt_speedup(f.speedup)} {f.verdict.removesuffix(' from')}"
        where = f"from {fmt_bytes(f.faster_from)} up" if f.verdict == "faster from" else (
            "all sizes" if len(f.by_size) > 1 else f"at {fmt_bytes(f.by_size[0][0])}")
    return f"{first}\n{where} · {trust}", _TONE[f.verdict]


def summary_table(runs: Sequence[Run]) -> Table | None:
    """Ops × backend pairs (× forms), one speedup each with its verdict and trust mark; None without ratios."""
    found = pair_findings(runs)
    if not found:
        return None
    multi = len({f.run for f in found}) > 1  # a run tag only when several runs have bench rows
    pairs = list(dict.fromkeys((f.run, f.backend, f.baseline) for f in found))
    forms = {p: [x for x in _FORMS if any((f.run, f.backend, f.baseline, f.form) == (*p, x) for f in found)]
             for p in pairs}
    columns = [(p, form) for p in pairs for form in forms[p]]
    ops = list(dict.fromkeys(f.op for f in found))
    index = {(f.run, f.backend, f.baseline, f.form, f.op): f for f in found}
    rows, tones = [], []
    for op in ops:
        cells, cell_tones = [op], [""]
        for (run, backend, baseline), form in columns:
            f = index.get((run, backend, baseline, form, op))
            text, tone = _cell(f) if f is not None else (MISSING, "")
            cells.append(text)
            cell_tones.append(tone)
        rows.append(cells)
        tones.append(cell_tones)
    groups = [("", 1)] + [((f"[{runs[run].tag}] " if multi else "") + f"{backend} vs {baseline}", len(forms[(run, backend, baseline)]))
                          for run, backend, baseline in pairs]
    return Table(headers=["op"] + [form for _, form in columns], units=[""] * (1 + len(columns)), rows=rows,
                 flags=[""] * len(rows), numeric=[False] * (1 + len(columns)), groups=groups, tones=tones,
                 caption="speedup = the baseline's median time / this backend's (> 1 = faster), the median over "
                         "the sizes where the verdict holds; ✓ every row trusted, ⚠ rows left out as noisy (p99 > "
                         "3x median, its own or its baseline's) or wrong.")


def findings_section(runs: Sequence[Run]) -> Section | None:
    """The Findings section (see the module docstring); None when no run has result rows."""
    answers = [(run, answer(run.results)) for run in runs]
    if not any(lines for _, lines in answers):
        return None
    section = Section("Findings", anchor="findings")
    for run, lines in answers:
        if lines:
            head = lines[0].removeprefix(_HEAD) if lines[0].startswith(_HEAD) else ""
            section.blocks.append(Answer(f"{run.tag}: {run.label}" if len(runs) > 1 else "",
                                         lines[1:] if head else lines, head=head))
    table = summary_table(runs)
    if table is not None:
        section.blocks.append(table)
    for figure in (plots.headline_plot(runs), plots.train_plot(runs)):
        if figure is not None:
            section.blocks.append(figure)
    sentences = pair_sentences(runs)
    trust = trust_sentences(runs)
    if sentences or trust:
        section.blocks.append(Section("Findings in detail", level=3, anchor="findings-detail"))
        section.blocks += [Paragraph(text) for text in sentences]
        section.blocks += [Paragraph(text, tone=tone) for tone, text in trust]
    return section
