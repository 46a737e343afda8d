"""What a train run found: which strategy to pick for the model on these devices, and whether every strategy
computed what ``single`` did.

:func:`train_findings` is what ``gpucomm train`` ends with and what a report's findings say of train rows:
per workload (model, precision, global batch, sequence length, device type), two lines —

1. **the pick**: the fastest strategy (samples/s) among those that finished and whose results are not
   different from single's, the number that decides it (its throughput against the runner-up's; "about
   even" within :data:`~gpucomm.report.findings.bench.EVEN`) and its scaling efficiency; when one device
   beats every multi-device strategy, it says that data parallelism does not pay on these devices.  When
   the step times cannot carry the answer it says so ("not firm"): the margin is smaller than the step-time
   spread (p90 / median, when above :data:`NOISY_STEPS`) of either strategy compared, or a scaling
   efficiency above 105% says single's own steps were slowed (contention), not that two devices did more
   than twice the work;
2. **the equality verdict**: the strategies equal to single within their tolerance, those that differ,
   failed or could not run here (with the reason).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from gpucomm.records import TrainRecord
from gpucomm.report._format import fmt_float, fmt_pct
from gpucomm.report.findings import glance
from gpucomm.report.findings.bench import EVEN

__all__ = ["NOISY_STEPS", "train_findings", "train_glance"]

NOISY_STEPS = 1.5
"""p90 step time / median step time above which a strategy's steps are unsteady (on a GPU the two are within a
few percent; a contended CPU run is where this triggers): a pick whose margin is smaller than that spread is
not firm."""


def _where(r: TrainRecord) -> str:
    """"2 CPU devices", "4 GPUs (cuda:0 × 4)", "1 GPU (cuda:0)"."""
    n = r.n_devices
    if r.device_type == "cpu":
        return f"{n} CPU device{'s' * (n != 1)}"
    distinct = list(dict.fromkeys(r.devices))
    names = f"{distinct[0]} × {len(r.devices)}" if len(distinct) == 1 and len(r.devices) > 1 else ", ".join(distinct)
    return f"{n} GPU{'s' * (n != 1)}" + (f" ({names})" if names else "")


def _label(r: TrainRecord) -> str:
    return f"{r.strategy} on {r.n_devices}" if r.n_devices > 1 and r.strategy != "single" else r.strategy


def _sps(r: TrainRecord) -> str:
    return f"{fmt_float(r.samples_per_s, 1)} samples/s"


def _spread(r: TrainRecord) -> float:
    """p90 step / median step: how far one step's time strays (1.0 for a steady run)."""
    return r.step_ms_p90 / r.step_ms_median if r.step_ms_median and r.step_ms_p90 else 1.0


def _caveat(best: TrainRecord, other: TrainRecord | None, single: TrainRecord | None = None, *,
            brief: bool = False) -> str:
    """" Not firm: …" when the step times cannot carry the answer; "" otherwise.

    A pick is firm when its margin over the strategy it is compared with (the ratio of their samples/s)
    is larger than either one's step-time spread (p90 / median): a margin smaller than the spread could
    come from the few slow steps alone.  A scaling efficiency above 105% means single's own steps were
    slowed (two devices cannot do more than twice the work of one), so single's throughput is no reference;
    a quoted scaling efficiency is no firmer than single's own steps (``single``).  ``brief``: the reasons
    in a few words, without their figures.
    """
    parts = []
    if other is not None and other.samples_per_s:
        margin = best.samples_per_s / other.samples_per_s
        worst = max((best, other), key=_spread)
        if _spread(worst) > NOISY_STEPS and margin < _spread(worst):
            parts.append("the margin is within the step-time spread" if brief else
                         f"the {margin:.2f}x margin is within the steps' spread ({_label(worst)}'s p90 step is "
                         f"{_spread(worst):.2f}x its median)")
    high = [r for r in (best, other) if r is not None and r.scaling_efficiency is not None
            and r.scaling_efficiency > 1.05]
    if high:
        parts.append("single's own steps were slowed" if brief else
                     f"{fmt_pct(high[0].scaling_efficiency)} scaling efficiency means single's own steps were slowed")
    elif (single is not None and single is not best and best.scaling_efficiency is not None
          and _spread(single) > NOISY_STEPS):
        parts.append("single's steps were unsteady" if brief else
                     f"its scaling efficiency is against single, whose p90 step is {_spread(single):.2f}x its median")
    if not parts:
        return ""
    if brief:
        return f" Not firm ({'; '.join(parts)}): rerun with more --steps on a quiet machine."
    return f" Not firm: {'; '.join(parts)} — rerun with more --steps on a quiet machine."


def _pick(model: str, records: list[TrainRecord], *, brief: bool = False) -> str:
    """The strategy to pick and the number that decides it (``brief``: the runner-up's throughput and the
    caveat's figures left out)."""
    ok = [r for r in records if r.status == "ok" and r.samples_per_s]
    usable = sorted((r for r in ok if r.equal_to_single is not False), key=lambda r: -(r.samples_per_s or 0.0))
    if not usable:
        return f"{model}: no strategy finished with results equal to single's; nothing to pick (see the table)."
    best, rest = usable[0], usable[1:]
    multi = [r for r in usable if r.n_devices > 1]
    if best.n_devices == 1 and multi:
        top = multi[0]
        if brief:
            return (f"Pick {best.strategy} for {model}: one device ({_sps(best)}) beats {top.strategy} on "
                    f"{_where(top)} ({_sps(top)})." + _caveat(best, top, brief=True))
        eff = f", {fmt_pct(top.scaling_efficiency)} scaling efficiency" if top.scaling_efficiency is not None else ""
        return (f"Pick {best.strategy} for {model}: one device ({_sps(best)}) is faster than the best multi-device "
                f"strategy, {top.strategy} on {_where(top)} ({_sps(top)}{eff}) — data parallelism does not pay on "
                f"these devices." + _caveat(best, top))
    text = f"Pick {best.strategy} for {model} on {_where(best)}: {_sps(best)}"
    if rest:
        runner = rest[0]
        ratio = best.samples_per_s / runner.samples_per_s
        even = " — about even" if ratio <= 1.0 + EVEN else ""
        text += (f", {ratio:.2f}x {_label(runner)}{even}" if brief else
                 f", {ratio:.2f}x the next best, {_label(runner)} ({_sps(runner)}){even}")
    if best.scaling_efficiency is not None and best.n_devices > 1:
        text += f"; {fmt_pct(best.scaling_efficiency)} scaling efficiency"
    single = next((r for r in usable if r.strategy == "single"), None)
    return text + "." + _caveat(best, rest[0] if rest else None, single, brief=brief)


def _reason(note: str) -> str:
    """The first clause of a row's note, without its parenthesis: why it did not run or failed."""
    return note.split("; ")[0].split(" (")[0].strip() or "no reason recorded"


def _names(records: list[TrainRecord]) -> str:
    """"replicated and ddp (2 devices)", or "dp on 2, dp on 4" when the device counts differ."""
    counts = {r.n_devices for r in records}
    if len(counts) == 1:
        names = [r.strategy for r in records]
        text = ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]
        n = counts.pop()
        return text + (f" ({n} devices)" if n > 1 else "")
    return ", ".join(_label(r) for r in records)


def _equality(records: list[TrainRecord], *, brief: bool = False) -> str:
    """The equality verdict (``brief``: without the tolerance and the reasons a strategy failed or did not run)."""
    equal = [r for r in records if r.status == "ok" and r.equal_to_single is True]
    different = [r for r in records if r.status == "ok" and r.equal_to_single is False]
    failed = [r for r in records if r.status == "failed"]
    skipped = [r for r in records if r.status not in ("ok", "failed")]
    parts = []
    if equal:
        tols = sorted({f"{r.tolerance:.0e}" for r in equal if r.tolerance is not None})
        within = f" within {', '.join(tols)}" if tols else ""
        parts.append(f"{_names(equal)} computed what single did" + ("" if brief else
                                                                    f" (loss and parameters{within})"))
    for r in different:
        worst = max((v for v in (r.max_loss_rel_diff, r.max_param_rel_diff) if v is not None), default=None)
        diff = f": relative difference {worst:.1e}" if worst is not None and not brief else ""
        tol = f" > {r.tolerance:.0e}" if r.tolerance is not None and worst is not None and worst > r.tolerance else ""
        parts.append(f"{_label(r)} is DIFFERENT from single{diff}{tol * (not brief)}")
    parts += [f"{_label(r)} FAILED" + ("" if brief else f" ({_reason(r.note)})") for r in failed]
    parts += [f"{_label(r)} not run" + ("" if brief else f" ({_reason(r.note)})") for r in skipped]
    if not parts:
        return "Equality: only single ran; there is nothing to compare it with."
    return "Equality: " + "; ".join(parts) + "."


def _workloads(records: Iterable[TrainRecord]) -> list[tuple[str, list[TrainRecord]]]:
    """(name, rows) per workload (model, precision, global batch, sequence length, device type); the name is
    the model's, with the rest said when several workloads are in the rows."""
    groups: dict[tuple, list[TrainRecord]] = defaultdict(list)
    for r in records:
        groups[(r.model, r.precision, r.global_batch, r.seq_len, r.device_type)].append(r)
    several = len(groups) > 1
    return [(f"{model} ({precision}, global batch {batch}" + (f", sequence {seq})" if seq else ")") if several
             else model, group) for (model, precision, batch, seq, _), group in groups.items()]


def train_findings(records: Iterable[TrainRecord]) -> list[str]:
    """Per workload, the strategy to pick and why, then the equality verdict (two lines each).

    Args:
        records: the train rows of one run (or several runs of the same workloads).

    Returns:
        Lines of plain text, e.g. ``["Pick replicated for gpt-tiny on 2 GPUs (cuda:0, cuda:1): 785.9 samples/s,
        1.36x the next best, ddp on 2 (576.1 samples/s); 96.0% scaling efficiency.", "Equality: replicated on 2,
        ddp on 2 computed what single did (loss and parameters within 1e-05); dp on 2 not run (…)."]``; empty
        without records.
    """
    return [line for name, group in _workloads(records) for line in (_pick(name, group), _equality(group))]


def train_glance(records: Iterable[TrainRecord], width: int, max_lines: int = glance.MAX_LINES) -> list[str]:
    """:func:`train_findings` in at most ``max_lines`` screen lines at ``width`` columns: ``gpucomm train``'s
    last lines.  The most detail that fits: the full pick and verdict, then the pick without the runner-up's
    throughput and the caveat's figures, then the verdict without tolerances and reasons."""
    workloads = _workloads(records)
    levels = ((False, False), (True, False), (False, True), (True, True))
    return glance.fit(([line for name, group in workloads
                        for line in (_pick(name, group, brief=pick), _equality(group, brief=equality))]
                       for pick, equality in levels), width, max_lines)
