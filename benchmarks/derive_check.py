"""Is the H100 profile gpucomm derives from the H200's right?  Measured H100 points against the derived prices.

Why: ``--hardware h100-nvswitch`` prices compute from the shipped H200 profile, derived
(:mod:`gpucomm.advisor.compute.derive`): compute-bound time (matmuls, attention) taken as the H200's — same GH100
die and SM count, its sustained clock at 700 W assumed equal — and memory-bound time (the rest of a layer, the
head's loss, the embedding, the optimizer step) scaled by 4.8/3.35, the two datasheets' HBM bandwidths.  Both are
assumptions the advisor prints as "not measured".  This reads profiles measured on an H100 (``gpucomm measure``
on a lent H100, e.g. ``benchmarks/gpu/h100_check.sh``) and, for every point, prices its shape with the derived
source and with the H200 profile itself, and prints measured/derived and measured/H200 by kind (median, 10th
and 90th percentile, lowest, highest; layers also by checkpointing mode and by whether the point's time is its
kernels' busy time or the interval between CUDA events).  A measured/derived median near 1 says the
derivation holds at those shapes; measured/H200 is what an H100 runs against an H200 there, to set against the
derivation's factors.

With ``--holdout FILE`` (published runs, benchmarks/advisor_published.py's format) it also predicts each H100 row
on ``h100-nvswitch`` (the 80 GB part; the 96 GB rows are another part) whose shape one of the profiles
measured (same family, hidden width, heads and sequence length) twice, through
the CLI contract as advisor_published.py does: with the derived profile and with ``--compute-profile`` the
measured one, and prints both errors against the published figure with the compute time each prices.  Needs
no GPU.

Usage::

    PYTHONPATH=src python benchmarks/derive_check.py benchmarks/results/h100-check_h100x1_DATE/h100-*.json \\
        --holdout benchmarks/published_holdout.jsonl --out benchmarks/results/derive-check_cpu_DATE.txt
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from _report import emit  # noqa: E402
from profile_compare import spread  # noqa: E402  (benchmarks/ is the script's directory)

HARDWARE = "h100-nvswitch"


class CheckError(ValueError):
    """Bad input: one line for the user, exit 2."""


def load_h100(path: str) -> Any:
    """A measured H100 profile (:func:`gpucomm.advisor.compute.profile.load`), or CheckError naming the file."""
    from gpucomm.advisor.compute.profile import ProfileError, check_hardware, load

    try:
        prof = load(path, arg="PROFILE")
    except ProfileError as e:
        raise CheckError(str(e)) from None
    try:
        check_hardware(prof, HARDWARE, arg="PROFILE")  # the 80 GB part the derivation prices
    except ProfileError:
        raise CheckError(f"PROFILE {path}: expected a profile measured on the GPU {HARDWARE} prices (an H100 "
                         f"80GB), got one of {'a CPU' if prof.cpu else repr(prof.gpu)}; measure a lent H100 "
                         "with benchmarks/gpu/h100_check.sh") from None
    if prof.software != "eager" or prof.precision != "bf16":
        raise CheckError(f"PROFILE {path}: expected eager bf16 (what the shipped H200 profile measured), got "
                         f"{prof.software} {prof.precision}; measure with gpucomm measure's defaults")
    return prof


def derived_source() -> Any:
    """The ProfileSource ``--hardware h100-nvswitch`` prices from (derived from the shipped H200 profile)."""
    from gpucomm.advisor.compute import derive
    from gpucomm.advisor.compute.source import SHIPPED, shipped

    base = shipped(SHIPPED["h200-nvswitch"])
    src = derive.derive(base, HARDWARE) if base is not None else None
    if src is None:
        raise CheckError("the package ships no H200 profile to derive from; reinstall gpucomm")
    return src


def _t(row: dict[str, Any], *keys: str) -> tuple[float, bool]:
    """The point's time over ``keys`` (device time where busy times exist) and whether all were busy times."""
    from gpucomm.advisor.compute.profile import device_s

    return sum(device_s(row, k) for k in keys), all(f"busy_{k}" in row for k in keys)


def price(src: Any, kind: str, row: dict[str, Any]) -> tuple[float, float, float, bool, bool] | None:
    """(measured, derived, H200's, busy, extrapolated) for one point; None for kinds not priced alone."""
    from gpucomm.advisor.compute.profile import layer_shape_of
    from gpucomm.advisor.compute.shapes import AttentionShape, EmbeddingShape, HeadShape

    tab, sc = src._tables, src.scale
    notes: list[str] = []
    if kind == "layer":
        lay = tab.layer(layer_shape_of(row), 1, "eager", notes)
        meas, busy = _t(row, "fwd_s", "bwd_s")
        d, h = sc(lay.compute_s, lay.memory_s), lay.compute_s + lay.memory_s
    elif kind == "kernels":  # the layer's matmuls alone: compute-bound
        shape = layer_shape_of({**row, "ac": "none"})
        lay = tab.layer(shape, 1, "eager", notes)
        af, ab = tab.attention_s(shape.attention(), notes)
        h = lay.compute_s - af - ab
        meas, busy = _t(row, "gemm_fwd_s", "gemm_bwd_s")
        d = sc(h, 0.0)
    elif kind == "attention":
        af, ab = tab.attention_s(AttentionShape(head_dim=row["head_dim"], heads=row["heads"], seq=row["seq"],
                                                mb=row["mb"]), notes)
        meas, busy = _t(row, "fwd_s", "bwd_s")
        h = af + ab
        d = sc(h, 0.0)
    elif kind == "head":
        c, m = tab.head(HeadShape(family=row["family"], vocab=row["vocab"], hidden=row["hidden"], seq=row["seq"],
                                  mb=row["mb"], loss=row["loss"]), notes)
        meas, busy = _t(row, "seconds")
        d, h = sc(c, m), c + m
    elif kind == "embedding":
        h = tab.embedding(EmbeddingShape(vocab=row["vocab"], hidden=row["hidden"], seq=row["seq"], mb=row["mb"],
                                         positions=row["positions"]), notes)
        meas, busy = _t(row, "seconds")
        d = sc(0.0, h)
    elif kind == "optimizer":
        h, n = tab.optimizer(row["params"])
        notes.extend(n)
        meas, busy = _t(row, "seconds")
        d = sc(0.0, h)
    else:
        return None
    return meas, d, h, busy, bool(notes)


def _fmt_spread(xs: list[float]) -> str:
    if not xs:
        return "| 0 | | | | | |"
    med, p10, p90, lo, hi = spread(xs)
    return f"| {len(xs)} | {med:.3f} | {p10:.3f} | {p90:.3f} | {lo:.3f} | {hi:.3f} |"


def points_report(src: Any, profiles: list[tuple[str, Any]]) -> list[str]:
    groups: dict[str, list[tuple[float, float]]] = {}
    extrapolated: dict[str, int] = {}
    for name, prof in profiles:
        for kind, rows in prof.points.items():
            for row in rows:
                got = price(src, kind, row)
                if got is None:
                    continue
                meas, d, h, busy, ex = got
                keys = [f"{kind}", f"{kind} · {name}"]
                if kind == "layer":
                    keys += [f"layer · ac={row['ac']}", f"layer · {'busy' if busy else 'events'}",
                             f"layer · tp={row['tp']}"]
                for k in keys:
                    groups.setdefault(k, []).append((meas / d, meas / h))
                    extrapolated[k] = extrapolated.get(k, 0) + ex
    out = ["| points | n | measured/derived median | p10 | p90 | lowest | highest | measured/H200 median "
           "| extrapolated |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in sorted(groups, key=lambda k: (k.split(" ")[0], " · " in k, k)):
        pairs = groups[k]
        out.append(f"| {k} " + _fmt_spread([a for a, _ in pairs])
                   + f" {statistics.median(b for _, b in pairs):.3f} | {extrapolated[k]} |")
    return out


def _row_shape(row: dict[str, Any]) -> tuple[str, int, int, int]:
    """(family, hidden, heads, seq) of a published row, its family as advisor_published.py builds its --arch."""
    import advisor_published as ap

    seq = row.get("seq_len") or 0
    family = "llama" if "ffn_kind=swiglu" in ap._arch(row, seq) else "gpt"
    return family, row["hidden"], row["heads"], seq


def _profile_shape(prof: Any) -> set[tuple[str, int, int, int]]:
    """(family, hidden, heads, seq) of a profile's tp-1 layer points."""
    return {(r["family"], r["hidden"], r["heads"], r["seq"]) for r in prof.points.get("layer", []) if r["tp"] == 1}


def _layer_row(rid: str, layout: dict[str, Any], seq: int, src: Any, prof: Any) -> str:
    """One table row: a layer of the row's model at ``layout``, priced by ``src`` and by ``prof``'s own source."""
    from gpucomm.advisor.compute.profile import ProfileSource, layer_shape_of

    model = next(r for r in prof.points["layer"] if r["tp"] == 1)
    shape = layer_shape_of({**model, "tp": layout["tp"], "seq": seq // layout["cp"], "mb": layout["mb"],
                            "ac": layout["ac"]})
    cells = []
    for s in (src, ProfileSource(prof)):
        lay = s._tables.layer(shape, layout["cp"], "eager", [])
        cells.append((s.scale(lay.compute_s, lay.memory_s), s._tables.in_step(shape)))
    (d, di), (m, mi) = cells
    return (f"| {rid} | tp={layout['tp']} mb={layout['mb']} ac={layout['ac']} | {d * 1e3:.1f} | {di:.3f} | "
            f"{m * 1e3:.1f} | {mi:.3f} | {m / d:.3f} |")


def holdout_report(path: str, profiles: list[tuple[str, str, Any]], src: Any) -> list[str]:
    import advisor_published as ap

    try:
        rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise CheckError(f"--holdout {path}: expected published runs as JSON Lines, could not read it ({e}); "
                         "pass benchmarks/published_holdout.jsonl") from None
    out = ["| id | published | derived | error | compute s | measured H100 profile | error | compute s |",
           "|---|---:|---:|---:|---:|---|---:|---:|"]
    n, other, layer_rows = 0, [], []
    for row in rows:
        if not str(row.get("gpu", "")).startswith("H100") or not row.get("hidden"):
            continue
        match = [p for p in profiles if _row_shape(row) in _profile_shape(p[2])]
        argv, _ = ap.command(row)
        if not match or argv is None:
            continue
        if argv[argv.index("--hardware") + 1] != HARDWARE:  # the H100 96GB (HBM2e) rows: another part
            other.append(f"{row['id']} ({argv[argv.index('--hardware') + 1]})")
            continue
        name, file, prof = match[0]
        _, published, factor = ap.metric(row)
        cells, layouts = [], []
        for extra in ([], ["--compute-profile", file]):
            rc, o, err = ap.run_cli([*argv[:-3], *extra, *argv[-3:]])
            if rc != 0:
                cells.append(f"refused: {err.strip()}")
                continue
            best = json.loads(o)["advice"][0]
            layouts.append(best["layout"])
            pred = best["tokens_per_s_per_gpu"] * factor
            cells.append(f"{pred:,.1f} | {pred / published - 1:+.1%} | {best['compute_s']:.3f}")
        out.append(f"| {row['id']} | {published:,.1f} | {cells[0]} | {name} | {cells[1]} |")
        if layouts:
            layer_rows.append(_layer_row(row["id"], layouts[0], row.get("seq_len") or 0, src, prof))
        n += 1
    if not n:
        out.append("| (no H100 row of this file has a shape the profiles measured) | | | | | | | |")
    if layer_rows:
        out += ["", "One layer at each row's layout (tp, micro-batch, checkpointing of its advice): the isolated "
                "layer's price, and the factor a layer takes inside whole steps (1 where a profile has no whole "
                "steps at two layer counts).", "",
                "| id | layout | derived layer ms | in-step | measured profile's layer ms | in-step | "
                "measured/derived layer |", "|---|---|---:|---:|---:|---:|---:|", *layer_rows]
    if other:
        out += ["", f"Not predicted from the measured profile (another H100 part than the {HARDWARE} measured): "
                + ", ".join(other) + "."]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("profiles", nargs="+", metavar="PROFILE", help="compute profiles measured on an H100")
    p.add_argument("--holdout", metavar="FILE", help="published runs (JSON Lines) to predict both ways")
    p.add_argument("--out", help="also write the report to this file")
    a = p.parse_args(argv)
    try:
        profiles = [(Path(f).stem, f, load_h100(f)) for f in a.profiles]
        src = derived_source()
        lines = points_report(src, [(n, prof) for n, _, prof in profiles])
        held = holdout_report(a.holdout, profiles, src) if a.holdout else []
    except CheckError as e:
        print(f"derive_check: {e}", file=sys.stderr)
        return 2
    cmd = "python benchmarks/derive_check.py " + " ".join(argv if argv is not None else sys.argv[1:])
    dev = profiles[0][2].device
    head = ["# Measured H100 points against the H100 profile derived from the shipped H200 profile", "",
            f"command: {cmd}", f"date: {date.today().isoformat()}; run on CPU (prices only; the measurements are "
            "the profiles')",
            f"measured on: {dev.get('name')}, power limit {dev.get('power_limit_w')} W, sustained SM clock "
            + ", ".join(f"{n} {prof.device.get('sm_clock_sustained_mhz')} MHz" for n, _, prof in profiles),
            f"derived from: {src.name}; compute-bound x {src.scale.compute:g}, memory-bound x "
            f"{src.scale.memory:.4f}", "",
            "Each point's measured time (busy time of its kernels where it has one, else the CUDA-event interval) "
            "over the derived price of its shape and over the H200 profile's own price (no derivation); "
            "'extrapolated': points priced outside the H200 grid.", "", *lines]
    if held:
        head += ["", "## Held-out H100 runs predicted from each profile", "", *held]
    text = "\n".join(head) + "\n"
    return emit(text, a.out)


if __name__ == "__main__":
    sys.exit(main())
