"""What an advise run found: the recommended strategy per workload and the number that decides it.

:func:`advice_findings` is what a report's findings say of ``gpucomm advise`` rows: per workload
(hardware, cluster shape, model, global batch, sequence length), one line — the strategy ranked first,
its predicted step time, throughput and memory, and why it ranks first: the advisor's reason for it (the
margin the choice rests on), or else the runner-up's step time against it; strategies that do not fit in
memory are counted.  These are predictions, and the line says so.

``gpucomm advise --out`` records the answer it printed (the env block's ``extra["advise"]["answer"]``); a
run's one workload is then said in those words — the recommendation and the number that decides it, as the
command said them — rather than rebuilt from the rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from gpucomm.records import AdviceRecord, EnvRecord
from gpucomm.report._format import fmt_float, fmt_mem

__all__ = ["advice_findings", "said_answer"]


def _line(records: list[AdviceRecord], said: Sequence[str] = ()) -> str:
    r0 = records[0]
    shape = f"{r0.nodes} node{'s' * (r0.nodes != 1)} × {r0.gpus_per_node} GPUs of {r0.hardware}"
    head = f"{r0.model} ({r0.params / 1e6:,.0f}M parameters, global batch {r0.global_batch}) on {shape}"
    ranked = sorted((r for r in records if r.rank is not None), key=lambda r: r.rank)
    oom = sum(1 for r in records if not r.fits)
    tail = (f"; {oom} strateg{'ies do' if oom != 1 else 'y does'} not fit in memory") if oom else ""
    if said:  # the command's own words: "answer: …", "why: …"
        words = "; ".join(line.removeprefix("answer: ") for line in said)
        return f"{'Recommended' if ranked else 'Predicted'} for {head}: {words.rstrip('.')}{tail}."
    if not ranked:
        return f"Predicted for {head}: no strategy fits{tail}."
    best = ranked[0]
    text = (f"Recommended for {head}: {best.strategy} — predicted step {fmt_float(best.step_time_s * 1e3, 1)} ms, "
            f"{fmt_float(best.samples_per_s, 1)} samples/s, {fmt_mem(best.memory_per_gpu_bytes)} of "
            f"{fmt_mem(best.memory_capacity_bytes)} per GPU")
    if best.reason.strip():  # the advisor's own words for why it ranks first
        text += f"; why: {best.reason.strip()}"
    elif len(ranked) > 1:
        runner = ranked[1]
        change = runner.step_time_s / best.step_time_s - 1.0
        text += f"; next, {runner.strategy}: {fmt_float(runner.step_time_s * 1e3, 1)} ms ({change:+.1%})"
    calibrated = " (calibrated from bench records)" if best.calibrated else ""
    return text + tail + f"{calibrated}."


def advice_findings(records: Iterable[AdviceRecord], said: Sequence[str] = ()) -> list[str]:
    """One line per workload: the recommendation, its predicted step, throughput and memory, and the runner-up.

    ``said``: the answer ``gpucomm advise`` printed for these rows (its records' env block); used when the
    rows hold one workload.
    """
    groups: dict[tuple, list[AdviceRecord]] = defaultdict(list)
    for r in records:
        groups[(r.hardware, r.nodes, r.gpus_per_node, r.model, r.params, r.global_batch, r.seq_len)].append(r)
    said = said if len(groups) == 1 else ()
    return [_line(group, said) for group in groups.values()]


def said_answer(env: Iterable[EnvRecord]) -> list[str]:
    """The answer an ``advise`` run recorded (its env block's ``extra["advise"]["answer"]``); empty when there is
    none, or when several env blocks are read together (then no one answer belongs to the rows)."""
    env = list(env)
    advise = env[0].extra.get("advise") if len(env) == 1 else None
    said = advise.get("answer") if isinstance(advise, dict) else None
    return [str(x) for x in said] if isinstance(said, list) else []
