"""``gpucomm measure``: time a transformer's compute on the GPU at hand and save a compute profile.

Usage::

    gpucomm measure --out h200.json                        # the default grid (--estimate says how long)
    gpucomm measure --quick --out first-look.json          # a small grid, seconds
    gpucomm measure --model llama3-8b --out llama3-8b.json  # one model's shapes, every tp dividing its heads
    gpucomm measure --arch layers=24,hidden=2048,heads=16,ffn=5632 --seq 2048,4096 --out mine.json
    gpucomm measure --estimate                             # the grid's expected wall time on an H200, then exit
    gpucomm measure --device cpu --out cpu.json            # a CPU profile at toy shapes (labelled as such)
    gpucomm measure --merge h200.json --out h200.json      # only the grid's points h200.json lacks, added to it

The profile is what ``gpucomm advise`` prices compute from (``--compute-profile FILE``; the H200 profile
shipped with gpucomm was measured by this command).  What is timed (each point with CUDA events, warm, after
its work ran back to back for 0.1-0.4 s so that the clock has settled at the power limit as in a training run,
the host running ahead as in ``gpucomm train``; medians):
one transformer layer's forward and backward as one GPU of a layout runs it — hidden in, QKV and attention over
``heads / tp``, MLP ``ffn / tp``, ``seq`` tokens per sequence after context parallel, micro-batch ``mb`` — for
GPT-2-style (LayerNorm, biases, GeLU) and Llama-style (RMSNorm, rotary, SwiGLU, grouped-query attention) layers,
under every activation-checkpointing mode (none, selective, op, full); the layer's matmuls alone; causal SDPA;
the embedding; the final norm, head and loss (fp32-upcast logits or not); fused AdamW's step; and whole small
training steps with their peak allocated and reserved memory (the caching allocator's margin).

``--software`` is the stack measured: ``eager`` (the default; plain PyTorch) or ``compiled`` (each module
under ``torch.compile``).  ``fused`` (Megatron-Core / Transformer Engine kernels) is not measured: ``gpucomm
advise --software fused`` derives it from an eager profile.  ``--precision``: ``bf16`` (autocast over fp32
weights; the default on CUDA) or ``fp32`` (the default on CPU).

``--merge FILE`` completes an existing profile: it measures only the grid's points FILE lacks (a grid that grew
since FILE was measured), on a GPU of FILE's model with FILE's software and precision, and writes FILE's points
plus the new ones, the run named under the device block's ``merges``.  On a GPU it also measures the busy times
(below) of FILE's layer, matmul and attention points that lack them, keeping their measured times — and of its
whole steps too where FILE is an interrupted run, so that the completed profile has what an uninterrupted run
would have had.

Busy times: once every point is timed, each layer, matmul, attention and whole-step point runs three more
iterations under ``torch.profiler`` and the seconds its kernels, copies and memsets kept the device busy are
saved beside the measured times (``busy_fwd_s``, ``busy_bwd_s``, ``busy_seconds``...): a second pass, so that no
point is timed in a process a profiler already ran in (a finished profile can leave CUPTI attached,
pytorch/pytorch#144455).  Where the host issues work slower than
the GPU runs it (a small layer timed alone), the measured interval is the host's; the busy time is the device's.

Whole steps are timed in ``--step-rounds`` interleaved rounds (default 5: every step once a round, each step's
median kept; the profile's ``device.step_rounds`` says how many ran): the host time a layer costs is read as the
difference between two whole steps, and steps timed once each, minutes apart, read different host paces.

Interrupted (Ctrl-C, SIGTERM), it stops between points and saves what it measured, marked as interrupted; a
later ``--merge`` of that file that measures everything it lacks clears the mark (kept in its run as
``completed``), so a profile measured over two sittings of one machine reads as whole.
Exit status: 0 ok; 2 usage error (one line naming the flag: an unknown model, a bad ``--arch``, no CUDA device
for ``--device cuda``, an ``--out`` that cannot be written); nothing is measured or written on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]

_SOFTWARE_MEASURED = ("eager", "compiled")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``measure``; its help is this module's docstring."""
    p = subparsers.add_parser("measure", help="time a transformer's compute on this GPU: a compute profile",
                              description=__doc__)
    p.add_argument("--out", metavar="FILE", help="where to write the profile (JSON)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--quick", action="store_true", help="a small grid (tp 1, two widths per family)")
    what.add_argument("--model", help="the shapes of one preset model (see gpucomm advise --model)")
    what.add_argument("--arch", help="the shapes of one model: layers=..,hidden=..,heads=..[,kv_heads=..,ffn=..,"
                                     "ffn_kind=gelu-4h|swiglu,vocab=..,seq=..]")
    p.add_argument("--seq", help="with --model/--arch: sequence lengths, comma-separated (default: the model's)")
    p.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when there is one)")
    p.add_argument("--software", default="eager", help="eager (default) or compiled")
    p.add_argument("--precision", default=None, help="bf16 (autocast over fp32 weights; default on CUDA) or fp32")
    p.add_argument("--merge", metavar="FILE",
                   help="measure only the grid's points FILE (a profile of this GPU) lacks and add them to it, "
                        "and on a GPU the busy times its points lack")
    p.add_argument("--step-rounds", type=int, default=None, metavar="N",
                   help="time the whole steps in N interleaved rounds, the median kept (default 5; 1: once each)")
    p.add_argument("--estimate", action="store_true",
                   help="print the grid's expected wall time on an H200 and exit (measures nothing)")
    return p


def _usage(msg: str) -> int:
    print(f"gpucomm measure: error: {msg}; see gpucomm measure --help", file=sys.stderr)
    return 2


def _grid(args: argparse.Namespace, cpu: bool):
    from gpucomm import models
    from gpucomm.advisor.compute import shapes

    if args.model or args.arch:
        if args.model:
            arch = models.get(args.model)
        else:
            from gpucomm.advisor.layout import parse_arch

            arch = parse_arch(args.arch)
        seqs: tuple[int, ...] = ()
        if args.seq:
            try:
                seqs = tuple(int(s) for s in args.seq.split(",") if s.strip())
            except ValueError:
                raise ValueError(f"--seq {args.seq!r}: expected comma-separated integers, e.g. 2048,4096") from None
            if not seqs or min(seqs) < 1:
                raise ValueError(f"--seq {args.seq!r}: expected positive integers")
        name = f"model:{arch.name}"
        return shapes.model_grid(arch, seqs), name
    if args.seq:
        raise ValueError("--seq goes with --model or --arch; leave it out for the default grid")
    if cpu:
        return shapes.tiny_grid(), "tiny (CPU)"
    if args.quick:
        return shapes.quick_grid(), "quick"
    return shapes.default_grid(), "default"


def _out_problem(out: str) -> str:
    """Why ``--out`` cannot be written (checked before anything is measured), or "".  A missing parent
    directory is fine: it is created when the profile is saved (as the other commands create theirs)."""
    import os

    path = Path(out)
    if path.is_dir():
        return f"--out {out!r}: is a directory; give a file name, e.g. {Path(out) / 'profile.json'}"
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                return f"--out {out!r}: {str(parent)!r} is a file; give a path under a directory"
            if not os.access(parent, os.W_OK):
                return f"--out {out!r}: the directory {str(parent)!r} is not writable; give another path"
            return ""
    return ""


def _present(base, grid) -> frozenset[tuple[str, str]]:
    """The grid's points ``base`` already holds (each row is its shape's keys plus what was measured)."""
    from gpucomm.advisor.compute import measure, shapes

    out = set()
    for kind, shape in shapes.work(grid):
        key = shape.key()
        if any(all(row.get(k) == v for k, v in key.items()) for row in base.points.get(kind, [])):
            out.add(measure.point_key(kind, key))
    return frozenset(out)


def _merged(base, new, host: dict[str, Any]):
    """``base`` with ``new``'s points added, and the run that measured them under ``device["merges"]``."""
    from dataclasses import replace

    points = {k: [*base.points.get(k, []), *new.points.get(k, [])] for k in {*base.points, *new.points}}
    run = {"created": new.env.get("created"), "points": {k: len(v) for k, v in new.points.items() if v},
           "cpu_model": host.get("cpu_model"), "measure_s": new.device.get("measure_s"),
           "sm_clock_sustained_mhz": new.device.get("sm_clock_sustained_mhz"),
           **({"skipped": new.device["skipped"]} if new.device.get("skipped") else {}),
           **{k: new.device[k] for k in ("interrupted", "busy_interrupted", "step_rounds", "step_spread")
              if new.device.get(k)}}
    device = {**base.device, "merges": [*base.device.get("merges", []), run]}
    return replace(base, points=points, device=device, source="")


def run(args: argparse.Namespace) -> int:
    """Run ``gpucomm measure``; returns the exit status."""
    if args.software not in _SOFTWARE_MEASURED:
        hint = ("fused is derived from an eager profile, not measured: measure eager (the default) and ask "
                "gpucomm advise --software fused" if args.software == "fused" else "use eager or compiled")
        return _usage(f"--software {args.software!r}: {hint}")
    if args.precision not in (None, "bf16", "fp32"):
        return _usage(f"--precision {args.precision!r}: expected bf16 or fp32")
    if args.step_rounds is not None and args.step_rounds < 1:
        return _usage(f"--step-rounds {args.step_rounds}: expected a whole number of rounds, 1 or more "
                      f"(1 times each step once; the default 5 keeps each step's median of five)")
    device_text = args.device or "auto"
    cpu = device_text == "cpu"
    try:
        grid, grid_name = _grid(args, cpu)
    except ValueError as exc:
        return _usage(str(exc))
    if args.estimate:
        from gpucomm.advisor.compute import shapes

        rounds = args.step_rounds or shapes.STEP_ROUNDS
        t = shapes.estimate_s(grid, step_rounds=rounds)
        print(f"gpucomm measure: {grid_name} grid, {len(shapes.work(grid))} points, whole steps in {rounds} "
              f"round{'s' if rounds > 1 else ''}; expected {t:.0f} s on an H200 before the busy pass "
              f"(planning rates: {shapes.Rates().gemm_flops / 1e12:.0f} TFLOP/s GEMMs, "
              f"{shapes.Rates().attention_flops / 1e12:.0f} TFLOP/s attention; real setup adds more)")
        return 0
    if not args.out:
        return _usage("--out FILE is required (where the profile goes)")
    bad = _out_problem(args.out)
    if bad:
        return _usage(bad)

    import torch

    from gpucomm.devices import cuda_device_count

    if device_text == "auto":
        device = torch.device("cuda" if cuda_device_count() else "cpu")
    else:
        try:
            device = torch.device(device_text)
        except (RuntimeError, ValueError):
            return _usage(f"--device {device_text!r}: expected cuda, cuda:N or cpu")
        if device.type not in ("cuda", "cpu"):
            return _usage(f"--device {device_text!r}: expected cuda, cuda:N or cpu")
        if device.type == "cuda" and (device.index or 0) >= cuda_device_count():
            return _usage(f"--device {device_text}: {cuda_device_count()} CUDA device(s) visible; use --device cpu "
                          f"or an index below that")
    if device.type == "cuda":
        if device.index is None:  # "cuda" (or auto): the current device, named, so every point lands on it
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        if grid_name == "tiny (CPU)":
            grid, grid_name = _grid(args, False)
    elif not cpu:  # auto on a machine without a GPU: a CPU profile, said so
        grid, grid_name = _grid(args, True) if not (args.model or args.arch) else (grid, grid_name)
        print("gpucomm measure: no CUDA device: measuring a CPU profile at toy shapes", file=sys.stderr)
    precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")

    from gpucomm.advisor.compute import measure, profile
    from gpucomm.env import collect_env

    base, have = None, frozenset()
    if args.merge:
        try:
            base = profile.load(args.merge, arg="--merge")
        except profile.ProfileError as exc:
            return _usage(str(exc))
        here = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        for what, theirs, ours in (("GPU", base.gpu, here), ("software", base.software, args.software),
                                   ("precision", base.precision, precision)):
            if theirs != ours:
                return _usage(f"--merge {args.merge}: its {what} is {theirs}, this run's {ours}; merge into a "
                              f"profile measured the same way, or measure a new one with --out")
        have = _present(base, grid)

    env = collect_env(device.type, extra={"grid": grid_name, "software": args.software, "precision": precision})
    import signal
    from dataclasses import asdict, replace

    def _stop(signum, frame):  # timeout's SIGTERM: stop between points and save what was measured
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        prof = measure.measure(grid, device, software=args.software, precision=precision, grid_name=grid_name,
                               env=asdict(env), have=have,
                               **({"step_rounds": args.step_rounds} if args.step_rounds else {}))
        if base is not None:
            stopped = "interrupted" in prof.device or prof.device.get("busy_interrupted", False)
            prof = _merged(base, prof, env.host)
            if not stopped:  # FILE's points measured before busy times were recorded get them here
                was = {k: prof.device[k] for k in ("interrupted", "busy_interrupted") if prof.device.get(k)}
                # completing an interrupted run: what its own busy pass would have read, whole steps too
                points, filled, complete = measure.fill_busy(prof, device, kinds=measure.BUSY_KINDS if was else ())
                run_info = prof.device["merges"][-1]
                if filled:
                    run_info["busy_filled"] = filled
                if not complete:
                    run_info["busy_interrupted"] = True
                prof = replace(prof, points=points)
                if complete and was:  # FILE was an interrupted run this merge completed: the flags move to its run
                    run_info["completed"] = was
                    prof = replace(prof, device={k: v for k, v in prof.device.items() if k not in was})
    finally:
        signal.signal(signal.SIGTERM, previous)
    Path(args.out).absolute().parent.mkdir(parents=True, exist_ok=True)
    profile.save(prof, args.out)
    counts = ", ".join(f"{len(v)} {k}" for k, v in prof.points.items() if v)
    added = (f"; {sum(prof.device['merges'][-1]['points'].values())} points added to {args.merge}'s"
             + (f", busy times of {prof.device['merges'][-1]['busy_filled']} of its points"
                if prof.device["merges"][-1].get("busy_filled") else "")
             if base is not None else "")
    print(f"gpucomm measure: wrote {args.out}: {prof.gpu} ({'CPU profile' if prof.cpu else 'GPU profile'}), "
          f"{args.software}, {precision}; {counts}; {prof.device.get('measure_s', 0):.0f} s{added}")
    ran = prof.device["merges"][-1] if base is not None else prof.device
    if ran.get("step_spread"):
        sp = ran["step_spread"]
        print(f"  whole steps: each the median of {ran['step_rounds']} interleaved rounds (a step's slowest round "
              f"over its fastest: median {sp['median']:.2f}x, worst {sp['max']:.2f}x)")
    above = profile.busy_above(prof)
    if any(n for n, _ in above.values()):
        print("  busy times above the measured time (the busy pass read more than the timing: noise, or a GPU "
              "slower then; priced at the measured time): " + ", ".join(f"{n} of {m} {k}" for k, (n, m) in above.items()))
    print(f"  use it: gpucomm advise --hardware <the profile of this GPU> --compute-profile {args.out} ...")
    return 0
