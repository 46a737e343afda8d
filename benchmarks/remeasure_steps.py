"""Time a compute profile's whole steps again, all in one run on the GPU at hand, and write the profile with
them replaced.

Why: a layer's time inside a step is the marginal between two whole steps of one shape (and the host's time of
a layer, where they are host-paced); the two must come from one machine.  The shipped H200 profile's steps were
measured in three runs on three lent machines (its first measurement, and two ``gpucomm measure --merge`` runs
that added steps of more layers), so that some pairs divided one machine's step by another's
(benchmarks/results/gpu-logs-r16_h200x1_2026-12-04/README.txt).  Every other point is kept as it is.  An
interrupted run (SIGTERM, Ctrl-C) replaces nothing: half the steps from one machine would mix them again.

Usage (a GPU of the profile's model; about 2-3 minutes on an H200 for the default grid's 67 steps)::

    PYTHONPATH=src python benchmarks/remeasure_steps.py src/gpucomm/advisor/compute/data/h200.json --out new.json
"""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))


def main(argv: list[str] | None = None) -> int:
    import torch

    from gpucomm.advisor.compute import measure, profile
    from gpucomm.advisor.compute.shapes import Grid
    from gpucomm.env import collect_env

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
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
    steps = tuple(measure._shape_of("step", r) for r in base.points.get("step", []))
    grid = Grid(layers=(), attention=(), embeddings=(), heads=(), optimizers=(), steps=steps)
    env = collect_env(device.type, extra={"grid": "the profile's steps", "software": base.software,
                                     "precision": base.precision})

    def _stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    new = measure.measure(grid, device, software=base.software, precision=base.precision,
                          grid_name="the profile's steps", env=asdict(env))
    if "interrupted" in new.device:
        print(f"remeasure_steps: {new.device['interrupted']}; nothing replaced, {args.out} not written",
              file=sys.stderr)
        return 1
    run = {"created": new.env.get("created"), "replaced": {"step": len(new.points["step"])},
           "cpu_model": env.host.get("cpu_model"), "measure_s": new.device.get("measure_s"),
           "sm_clock_sustained_mhz": new.device.get("sm_clock_sustained_mhz"),
           "command": "python benchmarks/remeasure_steps.py " + " ".join(argv or sys.argv[1:]),
           **({"skipped": new.device["skipped"]} if new.device.get("skipped") else {})}
    out = replace(base, points={**base.points, "step": new.points["step"]},
                  device={**base.device, "merges": [*base.device.get("merges", []), run]}, source="")
    profile.save(out, args.out)
    print(f"remeasure_steps: wrote {args.out}: {len(new.points['step'])} of {len(steps)} steps timed again in "
          f"{new.device.get('measure_s', 0):.0f} s" + (f"; {len(new.device['skipped'])} left out"
                                                         if new.device.get("skipped") else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
