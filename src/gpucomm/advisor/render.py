"""How ``gpucomm advise`` shows an answer: the ranked table with a numbered reason per row, the rows left out,
the assumptions, the scaling table, and last the answer itself in a few lines; JSON; records for ``--out``.

The terminal width is the one every command uses (:func:`gpucomm._console.make_console`: ``COLUMNS``, the
terminal's, or 120 for a pipe).  Each row's reason states that row's own step time, after its own name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpucomm.advisor import calibrate
from gpucomm.advisor.answer import Advice
from gpucomm.advisor.search import TIE_MARGIN, Plan

__all__ = ["advice_records", "answer_glance", "answer_lines", "emit", "json_text", "print_advice", "print_calibration", "print_calibration_of", "write_out"]

GiB = 2**30


def _ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s < 10 else f"{s:,.2f} s"


def _name(advice: Advice, p: Plan) -> str:
    return advice.names.get(id(p), p.layout.label())


def advice_records(advice: Advice) -> list[Any]:
    """One :class:`~gpucomm.records.AdviceRecord` per row, best first."""
    from gpucomm.records import AdviceRecord

    job, prof = advice.job, advice.job.profile
    rows = []
    for p in advice.plans:
        t, m = p.time, p.memory
        tokens = p.tokens_per_s_per_gpu * job.gpus
        rows.append(AdviceRecord(
            strategy=_name(advice, p), hardware=prof.name, nodes=job.nodes, gpus_per_node=job.gpus_per_node,
            model=job.arch.name, params=job.arch.params(), global_batch=job.global_batch, seq_len=job.seq,
            step_time_s=t.step_s, samples_per_s=job.global_batch / t.step_s, scaling_efficiency=None,
            memory_per_gpu_bytes=int(m.total), memory_capacity_bytes=int(p.capacity or 0), fits=p.fits,
            comm_share=min(1.0, t.exposed_comm_s / t.step_s), rank=p.rank, reason=p.reason,
            calibrated=prof.calibrated, tokens_per_s=tokens, compute_s=t.compute_s, comm_s=t.comm_s,
            layout=p.layout.as_dict(), tokens_per_s_per_gpu=p.tokens_per_s_per_gpu, mfu=p.mfu,
            exposed_comm_s=t.exposed_comm_s, bubble_s=t.bubble_s, memory_params_bytes=int(m.params),
            memory_grads_bytes=int(m.grads), memory_optimizer_bytes=int(m.optimizer),
            memory_activations_bytes=int(m.activations), memory_logits_bytes=int(m.loss),
            memory_autocast_bytes=int(m.autocast), memory_buffers_bytes=int(m.buffers),
            memory_margin_bytes=int(m.margin), memory_reserve_bytes=int(m.runtime),
            memory_allocated_bytes=int(m.allocated), memory_reserved_bytes=int(m.reserved)))
    return rows


def json_text(advice: Advice, rows: list[Any]) -> str:
    from gpucomm.records import to_row

    prof = advice.job.profile
    return json.dumps({"hardware": prof.name, "calibrated": prof.calibrated, "assumptions": advice.assumptions,
                       "advice": [to_row(r) for r in rows],
                       "left_out": [{"strategy": n, "reason": why} for n, why in advice.left_out],
                       "scale": [{"strategy": s.strategy, "gpus": s.gpus, "nodes": s.nodes, "step_time_s": s.step_s,
                                  "samples_per_s": s.samples_per_s, "scaling_efficiency": s.efficiency,
                                  "fits": s.fits} for s in advice.scale],
                       "answer": answer_lines(advice)}, indent=1, allow_nan=False)


def answer_lines(advice: Advice, *, brief: bool = False) -> list[str]:
    """The answer: the recommendation and the number that decides it, in two lines (``brief``: without the
    layout and the memory, for a narrow terminal; :func:`answer_glance` picks)."""
    plans = advice.plans
    if not plans:
        return ["answer: no row applies to this profile (see the rows left out above)"]
    best = plans[0]
    cap = best.capacity
    if best.rank is None:  # nothing fits
        return [f"answer: nothing fits in {cap / GiB:.1f} GiB per GPU; the least over-full, {_name(advice, best)} "
                f"({best.layout.label()}), needs {best.memory.total / GiB:.1f} GiB",
                "try more GPUs, sharding (--layout shard=fsdp), checkpointing (ac=full) or a smaller micro-batch"]
    ranked = [p for p in plans if p.rank is not None]
    fastest = min(ranked, key=lambda p: p.time.step_s)
    layout = "" if brief else f" ({best.layout.label()})"
    head = (f"answer: {_name(advice, best)}{layout}, {_ms(best.time.step_s)} per step, "
            f"{best.tokens_per_s_per_gpu:,.0f} tokens/s per GPU")
    if fastest is not best:
        why = (f"within {TIE_MARGIN:.0%} of the fastest, {_name(advice, fastest)} at {_ms(fastest.time.step_s)}, "
               f"and simpler")
    elif len(ranked) > 1:
        nxt = ranked[1]
        gap = nxt.time.step_s / best.time.step_s - 1
        if gap <= TIE_MARGIN:
            close = sum(p.time.step_s <= best.time.step_s * (1 + TIE_MARGIN) for p in ranked)
            why = f"the fastest and the simplest of {close} rows within {TIE_MARGIN:.0%} of each other"
        else:
            why = f"{gap:.0%} faster than the next, {_name(advice, nxt)} at {_ms(nxt.time.step_s)}"
    else:
        why = "the only row that fits" if len(plans) > 1 else "the layout asked for"
    mem = (f"memory {best.memory.reserved / GiB:.1f} GiB reserved of {cap / GiB:.1f} GiB per GPU"
           if cap else f"memory {best.memory.reserved / GiB:.2f} GiB (no device capacity in this profile)")
    return [head, f"why: {why}" + ("" if brief else f"; {mem}")]


def answer_glance(advice: Advice, width: int) -> list[str]:
    """:func:`answer_lines` at the most detail that fits in five screen lines at ``width`` columns."""
    from gpucomm.report.findings import glance

    return glance.fit((answer_lines(advice), answer_lines(advice, brief=True)), width)


def print_advice(advice: Advice, console: Any) -> None:
    """The ranked table, each row's reason, the rows left out, the scaling table and the assumptions (the
    answer is printed last, by :func:`emit`, after the records are written)."""
    from rich.table import Table

    prof = advice.job.profile
    kind = " (calibrated from records)" if prof.calibrated else " (predicted)"
    table = Table(title=f"gpucomm advise: {advice.job.arch.name} on {advice.job.gpus} x {prof.name}{kind}",
                  title_justify="left")
    for col, just in (("#", "right"), ("row", "left"), ("step", "right"), ("tok/s/GPU", "right"),
                      ("GiB/GPU", "right"), ("note", "right")):
        table.add_column(col, justify=just, overflow="fold")
    for i, p in enumerate(advice.plans, 1):
        rank = str(p.rank) if p.rank is not None else "OOM"
        table.add_row(rank, f"{_name(advice, p)}: {p.layout.label()}", _ms(p.time.step_s), f"{p.tokens_per_s_per_gpu:,.0f}",
                      f"{p.memory.reserved / GiB:.1f}" + ("" if p.fits else " OOM"), f"[{i}]",
                      style=None if p.fits else "red")
    console.print(table)
    for i, p in enumerate(advice.plans, 1):
        console.print(f"[{i}] {_name(advice, p)}: {p.reason}", markup=False)
    for name, why in advice.left_out:
        console.print(f"left out: {name}: {why}", markup=False)
    if advice.scale:
        _print_scale(console, advice)
    for a in advice.assumptions:
        console.print(f"assumption: {a}", markup=False)


def _print_scale(console: Any, advice: Advice) -> None:
    from rich.table import Table

    strategies = list(dict.fromkeys(s.strategy for s in advice.scale))
    table = Table(title="predicted weak scaling: samples/s (efficiency)", title_justify="left")
    table.add_column("GPUs", justify="right")
    for s in strategies:
        table.add_column(s, justify="right")
    by = {(s.strategy, s.gpus): s for s in advice.scale}
    for gpus in sorted({s.gpus for s in advice.scale}):
        cells = []
        for name in strategies:
            s = by.get((name, gpus))
            cells.append("-" if s is None else f"{s.samples_per_s:,.0f} ({s.efficiency:.0%})" + ("" if s.fits else " OOM"))
        table.add_row(str(gpus), *cells)
    console.print(table)


def write_out(out: str, advice: Advice, rows: list[Any]) -> list[Path]:
    """AdviceRecord and ScaleRecord rows (env block first), and the scale plot; returns the files written."""
    from gpucomm.env import collect_env
    from gpucomm.records import RecordWriter, ScaleRecord

    prof = advice.job.profile
    device_type = "cpu" if prof.kind == "cpu-gloo" else "cuda"
    env = collect_env(device_type, extra={"advise": {"hardware": prof.name, "calibrated": prof.calibrated,
                                                     "prediction": True, "assumptions": advice.assumptions,
                                                     "answer": answer_lines(advice)}})
    env.devices = []  # a prediction: the machine it ran on is not the machine it describes
    scale = [ScaleRecord(strategy=s.strategy, hardware=prof.name, gpus=s.gpus, nodes=s.nodes,
                         samples_per_s=s.samples_per_s, scaling_efficiency=s.efficiency, step_time_s=s.step_s,
                         fits=s.fits) for s in advice.scale]
    with RecordWriter(out, env) as w:
        for r in [*rows, *scale]:
            w.write(r)
    written = [Path(out) / "records.jsonl"]
    if scale:
        from gpucomm.report.plots import scale_plot
        from gpucomm.report.runs import load_runs

        fig = scale_plot(load_runs([out]))
        if fig is not None:
            for ext, data in (("png", fig.png), ("svg", fig.svg)):
                path = Path(out) / f"advise-scale.{ext}"
                path.write_bytes(data)
                written.append(path)
    return written


def print_calibration(profile: Any, reproduced: list[dict[str, Any]], *, as_json: bool = False) -> None:
    """What calibration fitted, and how well the profile reproduces each configuration it was fitted from."""
    c = profile.calibration or {}
    checked = [r for r in reproduced if r["predicted_s"] is not None]
    errs = [abs(r["predicted_s"] / r["measured_s"] - 1) for r in checked]
    within = sum(e <= 0.10 for e in errs)
    summary = {"profile": profile.name, "kind": profile.kind, "from": c.get("from", ""),
               "collective_fits": len(c.get("collectives", [])),
               "compute_models": sorted((c.get("compute") or {}).get("models", {})),
               "per_device_s": c.get("per_device_s", {}), "slowdown": c.get("slowdown", {}),
               "reproduced": reproduced, "within_10pct": within, "checked": len(checked)}
    if as_json:
        print(json.dumps(summary, indent=1, default=str))
        return
    from gpucomm._console import make_console

    console = make_console(highlight=False)
    console.print(f"calibrated profile {profile.name} from {summary['from']}: {summary['collective_fits']} collective "
                  f"fits, compute of {', '.join(summary['compute_models']) or 'no model'}", markup=False)
    worst = max(checked, key=lambda r: abs(r["predicted_s"] / r["measured_s"] - 1), default=None)
    for r in reproduced:
        if r["predicted_s"] is None:
            console.print(f"left out: {r['what']}: {r['why']}", markup=False)
    if worst is not None:
        console.print(f"answer: it reproduces {within} of {len(checked)} measured configurations within 10% "
                      f"(worst {abs(worst['predicted_s'] / worst['measured_s'] - 1):.1%}: {worst['what']})",
                      markup=False)
    else:
        console.print("answer: nothing in these records can be predicted back", markup=False)


def emit(cfg: Any, advice: Advice) -> int:
    """Print (JSON, or the tables), write ``--out``, and end with the answer; returns the exit status."""
    rows = advice_records(advice)
    console = None
    if cfg.json:
        print(json_text(advice, rows))
    else:
        from gpucomm._console import make_console

        console = make_console(highlight=False)
        print_advice(advice, console)
    if cfg.out is not None:
        try:
            written = write_out(cfg.out, advice, rows)
        except OSError as exc:
            print(f"gpucomm advise: error: {exc}", file=sys.stderr)  # RecordWriter's message names --out
            return 2
        if console is not None:  # paths unwrapped (soft_wrap), so that they can be copied whole
            console.print(f"records: {written[0]}", markup=False, soft_wrap=True)
            if len(written) > 1:
                console.print("plot: " + ", ".join(str(p) for p in written[1:]), markup=False, soft_wrap=True)
            console.print(f"report: run gpucomm report {written[0].parent}", markup=False, soft_wrap=True)
    if console is not None:
        from gpucomm.report.terminal import Answer

        console.print(Answer(lambda width: answer_glance(advice, width)))
    return 0


def print_calibration_of(cfg: Any, profile: Any, results: Any) -> None:
    """``--calibrate`` without a model: what was fitted and how well it reproduces the records."""
    print_calibration(profile, calibrate.reproduce(profile, results) if results is not None else [], as_json=cfg.json)
