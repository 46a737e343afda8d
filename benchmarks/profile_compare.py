"""How far does a second measurement of one GPU model, on another machine, land from the first?  Two compute
profiles, point by point.

Why: a compute profile is one machine's measurement, and the lent machines of one GPU model differ (sustained
clock, power limit, host CPU: the shipped H200 profile's steps ran 1155-1530 MHz sustained over four runs of one
day, its ``device.merges``).  A user measures their own GPU (``gpucomm measure``) and can trust the shipped
profile, or their own, only as far as a second measurement agrees with it.  This reads two profiles of one GPU
model (and one software and precision), matches the points of each kind whose shape (every field that is not
measured) is equal, and prints, for each kind and measured field (times ``*_s`` and ``seconds``, busy times,
``*_bytes``), the new/old ratios of the matched pairs: their median, 10th and 90th percentiles, lowest and
highest.  The ``layer`` and ``step`` times (a layer's ``fwd_s + bwd_s``, a step's ``seconds``) are split by
whether the old point was device-bound or paced by the host (busy time under 0.8 of the measured time), since a
host-paced point moves with the host's CPU and a device-bound one with the GPU's clock.  Last, the points each
profile has that the other lacks.  Needs no GPU.

Usage::

    PYTHONPATH=src python benchmarks/profile_compare.py src/gpucomm/advisor/compute/data/h200.json new.json \\
        --out benchmarks/results/profile-compare_h200x1_DATE.txt
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

HOST_PACED = 0.8
"""A point whose busy time is under this share of its measured time was paced by the host."""

_PACE = {"layer": (("busy_fwd_s", "busy_bwd_s"), ("fwd_s", "bwd_s")), "step": (("busy_seconds",), ("seconds",))}
"""Per kind, the busy and the measured fields whose sums classify a point and give its time."""


def measured(field: str) -> bool:
    """A field that a point measured (seconds, bytes), not one of its shape."""
    return field.endswith(("_s", "seconds", "_bytes"))


def key_of(point: dict[str, Any]) -> str:
    """A point's shape: every field that is not measured (nested dicts too), as one hashable string."""
    return json.dumps({k: v for k, v in point.items() if not measured(k)}, sort_keys=True)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def match(old: list[dict], new: list[dict]) -> tuple[list[tuple[dict, dict]], int, int]:
    """The (old, new) pairs of equal shape, and how many points only ``old`` and only ``new`` have.

    .. note:: a shape measured twice in one profile pairs in order; what is left over counts as only in one.
    """
    groups: dict[str, tuple[list[dict], list[dict]]] = {}
    for side, points in enumerate((old, new)):
        for p in points:
            groups.setdefault(key_of(p), ([], []))[side].append(p)
    pairs = [pair for a, b in groups.values() for pair in zip(a, b, strict=False)]
    return (pairs, sum(max(len(a) - len(b), 0) for a, b in groups.values()),
            sum(max(len(b) - len(a), 0) for a, b in groups.values()))


def ratio(old: dict, new: dict, fields: tuple[str, ...]) -> float | None:
    """new/old of the sum of ``fields``; None where either lacks one or old's is not a positive number."""
    if not all(_number(p.get(f)) for p in (old, new) for f in fields):
        return None
    a, b = sum(old[f] for f in fields), sum(new[f] for f in fields)
    return b / a if a > 0 else None


def spread(ratios: list[float]) -> tuple[float, float, float, float, float]:
    """Median, 10th and 90th percentiles (inclusive), lowest and highest; one value is every one of them."""
    q = statistics.quantiles(ratios, n=10, method="inclusive") if len(ratios) >= 2 else [ratios[0]] * 9
    return statistics.median(ratios), q[0], q[-1], min(ratios), max(ratios)


def pace(point: dict, kind: str) -> str | None:
    """``host-paced`` or ``device-bound`` (module docstring); None where the point has no busy time."""
    busy, wall = _PACE[kind]
    if not all(_number(point.get(f)) for f in busy + wall) or sum(point[f] for f in wall) <= 0:
        return None
    share = sum(point[f] for f in busy) / sum(point[f] for f in wall)
    return "host-paced" if share < HOST_PACED else "device-bound"


def _describe(name: str, path: str, prof) -> str:
    d = prof.device
    bits = [prof.gpu, f"{prof.software} {prof.precision}", f"created {prof.env.get('created', '?')}",
            f"host {(prof.env.get('host') or {}).get('cpu_model', '?')}"]
    if d.get("sm_clock_sustained_mhz") is not None:
        bits.append(f"SM clock sustained {d['sm_clock_sustained_mhz']} MHz")
    if d.get("power_limit_w") is not None:
        bits.append(f"power limit {d['power_limit_w']:g} W")
    return f"{name} {path} ({', '.join(bits)})"


def _x(r: float) -> str:
    return f"x{r:.3f}"


def _load(profile, name: str, path: str):
    """The profile at ``path``, or the one-line error (``expected ..., but got ...; fix``) as a string."""
    try:
        return profile.load(path, arg=name)
    except (OSError, ValueError, TypeError) as exc:
        what = str(exc).removeprefix(f"{name} {path}: ")
        if not isinstance(exc, profile.ProfileError):
            what += "; pass a file written by gpucomm measure --out FILE"
        return f"{name}: expected a compute profile, but got {path}: {what}"


def main(argv: list[str] | None = None) -> int:
    from gpucomm.advisor.compute import profile

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="the first measurement (e.g. the shipped src/gpucomm/advisor/compute/data/h200.json)")
    ap.add_argument("new", help="a second measurement of the same GPU model")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    old, new = _load(profile, "old", args.old), _load(profile, "new", args.new)
    bad = next((p for p in (old, new) if isinstance(p, str)), None)
    if bad is None and new.gpu != old.gpu:
        bad = (f"new: expected a profile of the {old.gpu} (as old {args.old}), but got {new.gpu} ({args.new}); "
               "compare two measurements of one GPU model")
    if bad is None and (new.software, new.precision) != (old.software, old.precision):
        bad = (f"new: expected {old.software} {old.precision} (as old {args.old}), but got {new.software} "
               f"{new.precision} ({args.new}); measure it with --software {old.software} --precision {old.precision}")
    kinds = [k for k in profile.POINT_KINDS if old.points.get(k) or new.points.get(k)] if bad is None else []
    matched = {k: match(old.points.get(k, []), new.points.get(k, [])) for k in kinds}
    if bad is None and not any(pairs for pairs, _, _ in matched.values()):
        bad = (f"new: expected points of the shapes old measured (grid {old.grid or '?'}), but got none in common "
               f"({sum(map(len, old.points.values()))} points in {args.old}, {sum(map(len, new.points.values()))} "
               f"in {args.new}); measure the new one with the old one's grid")
    if bad is not None:
        print(f"profile_compare: error: {bad}", file=sys.stderr)
        return 2

    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        print(line, flush=True)

    say("# How far does a second measurement of one GPU model land from the first? Two compute profiles, "
        "point by point")
    say()
    say(f"command: python benchmarks/profile_compare.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"{_describe('old', args.old, old)}; {_describe('new', args.new, new)}")
    say()
    say("## new/old of each measured field over the points of equal shape")
    say()
    say("| kind | field | pairs | median new/old | 10th percentile | 90th percentile | lowest | highest |")
    say("|---|---|---:|---:|---:|---:|---:|---:|")
    for kind in kinds:
        pairs = matched[kind][0]
        fields = {f for a, b in pairs for f in a if measured(f) and f in b}
        for f in sorted(fields, key=lambda f: (f.endswith("_bytes"), f.startswith("busy_"), "bwd" in f, f)):
            ratios = [r for a, b in pairs if (r := ratio(a, b, (f,))) is not None]
            if ratios:
                say(f"| {kind} | {f} | {len(ratios)} | " + " | ".join(map(_x, spread(ratios))) + " |")
    say()
    say(f"## layer (fwd_s + bwd_s) and step (seconds) times by the old point's pace: host-paced where its busy time "
        f"is under {HOST_PACED:g} of its measured time")
    say()
    say("| kind | class | pairs | median new/old | 10th percentile | 90th percentile |")
    say("|---|---|---:|---:|---:|---:|")
    for kind in (k for k in _PACE if k in matched):
        by: dict[str, list[float]] = {}
        for a, b in matched[kind][0]:
            r = ratio(a, b, _PACE[kind][1])
            if r is not None:
                by.setdefault(pace(a, kind) or "no busy time", []).append(r)
        for cls in ("device-bound", "host-paced", "no busy time"):
            if by.get(cls):
                say(f"| {kind} | {cls} | {len(by[cls])} | " + " | ".join(map(_x, spread(by[cls])[:3])) + " |")
    say()
    say("## points of a shape only one profile has")
    say()
    say("| kind | matched | only in old | only in new |")
    say("|---|---:|---:|---:|")
    for kind in kinds:
        pairs, only_old, only_new = matched[kind]
        say(f"| {kind} | {len(pairs)} | {only_old} | {only_new} |")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
