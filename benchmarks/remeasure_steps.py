"""Time a compute profile's whole steps again, all in one run on the GPU at hand, interleaved in rounds, and
write the profile with their times replaced.

Why one run: a layer's time inside a step is the marginal between two whole steps of one shape (and the host's
time of a layer, where they are host-paced); the two must come from one machine.  The first H200 profile's
steps were measured in three runs on three lent machines (its first measurement, and two ``gpucomm measure
--merge`` runs that added steps of more layers), so that some pairs divided one machine's step by another's
(benchmarks/results/gpu-logs-r16_h200x1_2026-12-04/README.txt).  Why rounds: the host's time of each
checkpointing mode comes from its own steps, and timed once each, minutes apart, they carry different host
paces (:func:`gpucomm.advisor.compute.measure.retime_steps`).  Every other point, and each step's busy time and
memory peaks, are kept as they are.  Fewer than two whole rounds (an interrupt, or ``--seconds``) replace
nothing.

Usage (a GPU of the profile's model; the default grid's 67 steps once each, with a busy pass, took 108.6 s on an
H200; a round here has no busy pass and is not yet timed)::

    PYTHONPATH=src python benchmarks/remeasure_steps.py src/gpucomm/advisor/compute/data/h200.json --out new.json \
        --rounds 5 --seconds 420
"""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))


def main(argv: list[str] | None = None) -> int:
    import torch

    from gpucomm.advisor.compute import measure, profile
    from gpucomm.advisor.compute.shapes import STEP_ROUNDS
    from gpucomm.env import collect_env

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=STEP_ROUNDS,
                    help=f"rounds, every step timed once a round; the median kept (default {STEP_ROUNDS})")
    ap.add_argument("--seconds", type=float, default=None,
                    help="start no round that the time left cannot hold (default: every round)")
    args = ap.parse_args(argv)
    if args.rounds < 2:
        ap.error(f"--rounds: expected 2 or more (the median of rounds), got {args.rounds}; pass --rounds 5")
    try:
        base = profile.load(args.profile, arg="profile")
    except profile.ProfileError as exc:
        print(f"remeasure_steps: error: {exc}", file=sys.stderr)
        return 2
    if base.cpu:
        device = torch.device("cpu")
    elif torch.cuda.is_available() and torch.cuda.get_device_name() == base.gpu:
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        print(f"remeasure_steps: error: profile: measured on {base.gpu}; run this on a GPU of that model",
              file=sys.stderr)
        return 2
    env = collect_env(device.type, extra={"grid": "the profile's steps", "software": base.software,
                                          "precision": base.precision})

    def _stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    clock = measure.device_info(device).get("sm_clock_sustained_mhz")  # under load, at its start (as measure says)
    try:
        rows, ran = measure.retime_steps(base, device, rounds=args.rounds, seconds=args.seconds)
    except profile.ProfileError as exc:
        print(f"remeasure_steps: {exc}; nothing replaced, {args.out} not written", file=sys.stderr)
        return 1
    run = {"created": env.created, "replaced": {"step": len(rows)},
           "cpu_model": env.host.get("cpu_model"), "measure_s": ran["retime_s"], "rounds": ran["rounds"],
           "round_spread": ran["round_spread"],
           "sm_clock_sustained_mhz": clock,
           "command": "python benchmarks/remeasure_steps.py " + " ".join(argv or sys.argv[1:])}
    out = replace(base, points={**base.points, "step": rows},
                  device={**base.device, "step_rounds": ran["rounds"],
                          "merges": [*base.device.get("merges", []), run]}, source="")
    profile.save(out, args.out)
    print(f"remeasure_steps: wrote {args.out}: {len(rows)} steps timed again in {ran['rounds']} interleaved rounds, "
          f"{ran['retime_s']:.0f} s; a step's slowest round over its fastest: median x{ran['round_spread']['median']},"
          f" most x{ran['round_spread']['max']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
