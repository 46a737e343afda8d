"""Timing points: the phases of an iteration, on CPU here and on one CUDA device where there is one."""

import time

import pytest
import torch

from gpucomm.advisor.compute import measure, profile
from gpucomm.advisor.compute.shapes import (
    AttentionShape,
    EmbeddingShape,
    Grid,
    HeadShape,
    LayerShape,
    OptimizerShape,
    StepShape,
)
from gpucomm.testing import requires_gpus

from ._profiles import synthetic


def test_phases_are_medians_that_sum_to_the_median_iteration():
    calls = []

    def slow():
        calls.append("slow")
        time.sleep(0.02)

    def fast():
        calls.append("fast")

    a, b = measure.time_phases([slow, fast], torch.device("cpu"), warmup=1, timed=3)
    assert calls == ["slow", "fast"] * 4
    assert 0.015 < a < 0.2 and b < a


def test_settling_runs_the_work_back_to_back_for_its_seconds_and_only_on_cuda():
    calls = []
    t0 = time.perf_counter()
    measure._settle([lambda: calls.append(1)], torch.device("cpu"), 0.05)
    assert time.perf_counter() - t0 >= 0.05 and len(calls) > 10
    calls.clear()
    measure.time_phases([lambda: calls.append(1)], torch.device("cpu"), warmup=1, timed=2, settle_s=5.0)
    assert len(calls) == 3  # a CPU has no power limit to settle at: the argument is ignored there


def test_every_kind_a_grid_measures_has_a_settling_time():
    from gpucomm.advisor.compute.shapes import SETTLE_S, default_grid, work

    assert {kind for kind, _ in work(default_grid())} <= set(SETTLE_S)


def _grid():
    la = LayerShape(family="llama", hidden=64, heads=4, kv_heads=2, ffn=128, seq=64, mb=2)
    return Grid(layers=(la,), attention=(AttentionShape(head_dim=16, heads=4, seq=64),),
                embeddings=(EmbeddingShape(vocab=256, hidden=64, seq=64, mb=2),),
                heads=(HeadShape(family="llama", vocab=256, hidden=64, seq=64, mb=2),),
                optimizers=(OptimizerShape(width=64, layers=1),), steps=(StepShape(layer=la, vocab=256),))


def test_a_cpu_profile_is_labelled_and_answers_every_kind():
    p = measure.measure(_grid(), torch.device("cpu"), precision="fp32", grid_name="t", progress=lambda _: None)
    assert p.cpu and p.gpu == "cpu" and p.precision == "fp32"
    assert {k: len(v) for k, v in p.points.items()} == {"layer": 1, "kernels": 1, "attention": 2, "embedding": 1,
                                                         "head": 1, "optimizer": 1, "step": 1}
    assert p.points["layer"][0]["fwd_s"] > 0 and p.points["kernels"][0]["gemm_bwd_s"] > 0
    profile.from_json(p.to_json(), path="x")  # what it writes is what the loader accepts


@requires_gpus(1)
def test_a_tiny_layer_measured_on_cuda_with_its_memory_and_clocks():
    dev = torch.device("cuda", 0)
    p = measure.measure(_grid(), dev, precision="bf16", grid_name="t", progress=lambda _: None)
    assert p.device["type"] == "cuda" and p.device["copy_gbps"] > 10 and p.device["settle_s"]["layer"] > 0
    lay = p.points["layer"][0]
    assert 0 < lay["fwd_s"] < 0.1 and 0 < lay["bwd_s"] < 0.1
    step = p.points["step"][0]
    assert step["peak_reserved_bytes"] >= step["peak_allocated_bytes"] > 0


def test_busy_time_is_the_union_of_device_activity_between_markers_per_phase():
    """Two phases, two iterations: five markers; the busy time of a phase is the union of the intervals between
    its markers (overlaps counted once, the gaps and the markers left out), the median over iterations."""
    mk = "at::cuda::(anonymous namespace)::spin_kernel(long)"
    ev = [(0, 5, mk),
          (10, 100, "gemm"), (150, 50, "elementwise"),  # phase 0, iteration 0: 150 ns busy over 190 ns
          (300, 5, mk),
          (310, 40, "a"), (330, 40, "memcpy"),  # overlapping: 60 ns
          (400, 5, mk),
          (410, 300, "gemm"),  # phase 0, iteration 1: 300 ns
          (800, 5, mk),
          (810, 20, "a"),  # phase 1, iteration 1: 20 ns
          (900, 5, mk)]
    got = measure.split_busy(list(reversed(ev)), n_phases=2, iterations=2)  # sorted by start inside
    assert got == pytest.approx([(150 + 300) / 2 * 1e-9, (60 + 20) / 2 * 1e-9])
    with pytest.raises(RuntimeError, match="4 marker kernels in the profile, expected 5"):
        measure.split_busy(ev[:-1], n_phases=2, iterations=2)


def test_busy_times_are_for_cuda_only_and_a_cpu_merge_fills_none():
    assert measure.busy_phases([lambda: None], torch.device("cpu")) is None
    p = measure.measure(_grid(), torch.device("cpu"), precision="fp32", grid_name="t", progress=lambda _: None)
    assert not any(k.startswith("busy_") for rows in p.points.values() for r in rows for k in r)
    points, filled, complete = measure.fill_busy(p, torch.device("cpu"))
    assert filled == 0 and complete and points == p.points


def test_measure_times_every_point_before_any_profiler_pass(monkeypatch):
    """No point is timed in a process the profiler already ran in (a finished profile can leave CUPTI attached,
    pytorch/pytorch#144455): measure times every point with no busy pass between them, then reads the busy
    times of its layer, matmul, attention and step points in one pass after the last."""
    calls: list = []
    timed = measure.time_phases
    monkeypatch.setattr(measure, "time_phases", lambda *a, **k: (calls.append("time"), timed(*a, **k))[1])
    monkeypatch.setattr(measure, "busy_phases", lambda *a, **k: calls.append("profiler"))

    def fill(prof, device, progress=None, kinds=()):
        calls.append(("busy pass", kinds))
        return prof.points, 0, True

    monkeypatch.setattr(measure, "fill_busy", fill)
    measure.measure(_grid(), torch.device("cpu"), precision="fp32", grid_name="t", progress=lambda _: None)
    assert calls[-1] == ("busy pass", ("layer", "kernels", "attention", "step"))
    assert calls[:-1] and set(calls[:-1]) == {"time"}


@requires_gpus(1)
def test_busy_times_on_cuda_are_the_devices_share_of_each_measured_phase():
    """Each layer, matmul, attention and step point gets busy times, no longer than its measured phases (the
    host's gaps are out of them); a merge fills the busy times a profile lacks and keeps its measured times."""
    dev = torch.device("cuda", 0)
    p = measure.measure(_grid(), dev, precision="bf16", grid_name="t", progress=lambda _: None)
    for kind, keys in (("layer", ("fwd_s", "bwd_s")), ("kernels", ("gemm_fwd_s", "gemm_bwd_s")),
                       ("attention", ("fwd_s", "bwd_s")), ("step", ("seconds",))):
        for r in p.points[kind]:
            for k in keys:
                assert 0 < r[f"busy_{k}"] <= 1.05 * r[k], (kind, k, r)
    stripped = {k: [{f: v for f, v in r.items() if not f.startswith("busy_")} for r in rows]
                for k, rows in p.points.items()}
    from dataclasses import replace

    points, filled, complete = measure.fill_busy(replace(p, points=stripped), dev, progress=lambda _: None)
    assert complete and filled == sum(len(p.points[k]) for k in measure.FILL_KINDS)
    assert not any(k.startswith("busy_") for k in points["step"][0])  # a step's busy time is not filled
    assert points["layer"][0]["fwd_s"] == p.points["layer"][0]["fwd_s"]
    assert 0 < points["layer"][0]["busy_bwd_s"] <= 1.05 * points["layer"][0]["bwd_s"]


def test_an_interrupt_keeps_what_was_measured_and_a_broken_point_is_named(monkeypatch):
    def broken(ctx, shape, expected):
        raise RuntimeError("no kernel for this shape\nsecond line")

    def stop(ctx, shape, expected):
        raise KeyboardInterrupt

    monkeypatch.setitem(measure._MEASURE, "head", broken)
    monkeypatch.setitem(measure._MEASURE, "layer", stop)
    said = []
    p = measure.measure(_grid(), torch.device("cpu"), precision="fp32", progress=said.append)
    assert p.points["attention"] and p.points["step"] and not p.points["layer"] and not p.points["head"]
    assert p.device["interrupted"].startswith("after 5 of")
    assert p.device["skipped"] == [f"head {_grid().heads[0].key()}: RuntimeError: no kernel for this shape"]
    assert any("head point failed" in line for line in said)


def _op_profile():
    la = LayerShape(family="gpt", hidden=64, heads=4, kv_heads=4, ffn=256, seq=16, mb=1, ac="op")
    grid = Grid(layers=(LayerShape(**{**la.key(), "ac": "none"}), la),
                attention=(AttentionShape(head_dim=16, heads=4, seq=16),),
                embeddings=(EmbeddingShape(vocab=256, hidden=64, seq=16, mb=1),),
                heads=(HeadShape(family="gpt", vocab=256, hidden=64, seq=16, mb=1),),
                optimizers=(OptimizerShape(width=64, layers=1),),
                steps=(StepShape(layer=la, vocab=256, layers=2), StepShape(layer=la, vocab=256, layers=8)))
    return measure.measure(grid, torch.device("cpu"), precision="fp32", grid_name="t", progress=lambda _: None)


def test_host_ratios_time_the_profiles_isolated_point_again_here():
    """Without whole op steps, the ratio is this machine's time of the profile's op point over the profile's: a
    profile that recorded the point 10,000 x slower than this machine runs it reads about 1e-4; one 10,000 x
    faster about 1e4 (the factors leave room for a loaded CPU, where one timing of the same point moves 40x)."""
    p = _op_profile()
    src = profile.ProfileSource(p)
    (row,) = [r for r in p.points["layer"] if r["ac"] == "op"]
    src.host_steps = dict  # no whole op steps to time
    for factor, check in ((1e4, lambda r: r < 0.1), (1e-4, lambda r: r > 10)):
        scaled = dict(row, fwd_s=row["fwd_s"] * factor, bwd_s=row["bwd_s"] * factor)
        src.host_points = lambda scaled=scaled: {"gpt": scaled}
        ratios, line = measure.host_ratios(src)
        assert check(ratios[("gpt", "op")]), (factor, ratios, line)
        assert line.startswith("host: this machine's") and "op layer" in line and "median of 5" in line


def test_host_ratios_time_the_profiles_whole_op_steps_again_here():
    """Where the host time came from whole op steps, the probe times those two steps here and divides their
    marginal time a layer by the host time a layer the profile prices: a profile pricing 10,000 x less than
    this machine's marginal reads above 10; one pricing 10,000 x more reads below 0.1."""
    p = _op_profile()
    src = profile.ProfileSource(p)
    # the marginal takes out the optimizer over the extra layers, priced from the profile's one CPU-timed
    # optimizer point; on a loaded 2-core machine that price outgrew the steps' real difference (a negative
    # marginal, "unreadable here"), so it is left out: what is tested is that the steps are timed and divided
    src._tables.optimizer = lambda params: (0.0, ())
    a, b = sorted((r for r in p.points["step"]), key=lambda r: r["layers"])
    marginal = (b["seconds"] - a["seconds"]) / 6
    src.host_points = dict
    for there, check in ((abs(marginal) * 1e-4 + 1e-9, lambda r: r > 10), (abs(marginal) * 1e4 + 1.0,
                                                                            lambda r: r < 0.1)):
        src.host_steps = lambda there=there: {("gpt", "op"): (a, b, there)}
        ratios, line = measure.host_ratios(src)
        assert check(ratios[("gpt", "op")]), (there, ratios, line)
        assert "op steps of 2 and 8 layers" in line and "medians of 5; one round's " in line


def test_host_ratios_read_this_hosts_marginal_as_the_profile_reads_its_own(monkeypatch):
    """The probe's marginal time a layer here is the profile's own formula (ProfileSource.marginal_s): the
    difference of the two steps a layer, the optimizer step over the extra layers' parameters taken out — the
    same quantity as the profile's host time it is divided by."""
    p = _op_profile()
    src = profile.ProfileSource(p)
    a, b = sorted((r for r in p.points["step"]), key=lambda r: r["layers"])
    timed = {2: 10.0, 8: 40.0}  # seconds: above any optimizer price a loaded CPU's timed point gives
    asked = []

    def step_seconds(ctx, layer, vocab, layers, loss="upcast", expected=None):
        asked.append((ctx.busy, ctx.window_s, expected))
        return timed[layers]

    monkeypatch.setattr(measure, "step_seconds", step_seconds)
    src.host_points = dict
    src.host_steps = lambda: {("gpt", "op"): (a, b, 0.01)}
    ratios, line = measure.host_ratios(src, repeats=1)
    here = src.marginal_s(a["layer"], a["vocab"], (2, timed[2]), (8, timed[8]))
    assert ratios[("gpt", "op")] == pytest.approx(here / 0.01)
    assert f"one round's {here * 1e3:.2f}-{here * 1e3:.2f})" in line  # each round's own marginal, said
    # the times alone (no profiler pass left behind in the process), each step's window sized by its time there
    assert asked == [(False, measure.HOST_WINDOW_S, r["seconds"]) for r in (a, b)]
    assert 0 < here < 30.0 / 6  # the optimizer's share of the extra layers is out


def test_host_steps_pick_the_least_device_work_pair():
    """host_steps: per (family, mode) with a whole-step host time, the fewest- and most-layer steps of the
    smallest shape of that mode, and the profile's host time a layer (_step_host)."""
    p = _op_profile()
    src = profile.ProfileSource(p)
    src._tables.__dict__["_step_host"] = {("gpt", "op"): 0.005}  # as if the lookups found the steps host-paced
    got = src.host_steps()
    assert set(got) == {("gpt", "op")}
    a, b, there = got[("gpt", "op")]
    assert (a["layers"], b["layers"], there) == (2, 8, 0.005)


def test_host_ratios_read_each_mode_from_its_own_steps(monkeypatch):
    """Each (family, mode) with whole-step host time is read from its own steps: a host that runs the full
    steps' layers 3x the profile's and the op steps' 1.5x reads 3 and 1.5, and a mode without steps takes the
    family's op reading (ProfileSource.host_ratio)."""
    p = _op_profile()
    src = profile.ProfileSource(p)
    a, b = sorted((r for r in p.points["step"]), key=lambda r: r["layers"])
    full = [dict(r, layer={**r["layer"], "ac": "full"}) for r in (a, b)]
    # seconds, not milliseconds: the marginal takes out the optimizer over the extra layers, priced from this
    # profile's CPU-timed optimizer point, which a loaded 2-core machine stretched past 0.3 s (a negative marginal)
    timed = {("op", 2): 10.0, ("op", 8): 40.0, ("full", 2): 20.0, ("full", 8): 80.0}
    monkeypatch.setattr(measure, "step_seconds",
                        lambda ctx, layer, vocab, layers, loss="upcast", expected=None: timed[(layer.ac, layers)])
    op_here = src.marginal_s(a["layer"], a["vocab"], (2, timed["op", 2]), (8, timed["op", 8]))
    full_here = src.marginal_s(full[0]["layer"], a["vocab"], (2, timed["full", 2]), (8, timed["full", 8]))
    src.host_points = dict
    src.host_steps = lambda: {("gpt", "full"): (*full, full_here / 3), ("gpt", "op"): (a, b, op_here / 1.5)}
    ratios, line = measure.host_ratios(src, repeats=1)
    assert ratios == pytest.approx({("gpt", "full"): 3.0, ("gpt", "op"): 1.5})
    assert "full steps of 2 and 8 layers" in line and "op steps of 2 and 8 layers" in line
    here = src.with_host(ratios, line)
    assert (here.host_ratio("gpt", "full"), here.host_ratio("gpt", "op")) == pytest.approx((3.0, 1.5))
    assert here.host_ratio("gpt", "none") == pytest.approx(1.5)  # not read: the family's op reading
    assert here.host_ratio("llama", "full") == 1.0  # a family not read: the profile's host


def test_host_ratios_refuse_without_the_profiles_gpu():
    p = synthetic(gpu="NVIDIA H200-like test GPU")  # a GPU no machine has, with host-paced op points
    for r in p.points["layer"]:
        if r["ac"] == "op":
            r["fwd_s"], r["bwd_s"] = 10 * r["fwd_s"], 10 * r["bwd_s"]
    with pytest.raises(profile.ProfileError, match=r"^--host this: .*(leave --host out|or leave --host out)"):
        measure.host_ratios(profile.ProfileSource(p))


@requires_gpus(1)
def test_host_ratios_on_the_shipped_profiles_gpu_or_the_one_derived_from_it():
    from gpucomm.advisor.compute import derive, source

    shipped = source.shipped("h200.json")
    src = profile.ProfileSource(shipped) if shipped else None
    if src is not None and torch.cuda.get_device_name(0) != shipped.gpu:
        src = derive.derive(shipped, "h100-nvswitch")  # on an H100: the source derived for it
    if src is None or torch.cuda.get_device_name(0) not in src.probe_gpus:
        pytest.skip(f"needs the shipped profile's GPU or one derived from it "
                    f"({src.probe_gpus if src else 'none shipped'})")
    ratios, line = measure.host_ratios(src, repeats=1)  # the plumbing: one round
    assert set(ratios) == {(fam, mode) for fam in ("gpt", "llama") for mode in profile.PROBED_MODES}, ratios
    assert all(0.05 < r < 20 for r in ratios.values()), ratios
    assert "ms in the profile" in line and "a layer here" in line  # the whole op steps, timed again


def test_a_timing_window_sets_the_least_seconds_of_timed_iterations():
    """A context with ``window_s`` (the probe's) times at least that long by the expected time of one iteration,
    never fewer iterations than a profile point, at most 200; without one, a profile point's count."""
    cuda = torch.device("cuda", 0)  # reps reads the device's type only
    assert measure._Ctx(cuda, "bf16", "eager").reps("step", 0.012) == (2, 5, 0.4)
    probe = measure._Ctx(cuda, "bf16", "eager", window_s=0.3)
    assert probe.reps("step", 0.012) == (2, 25, 0.4)
    assert probe.reps("step", 0.2) == (1, 3, 0.4)
    assert probe.reps("step", 1e-6) == (2, 200, 0.4)


def _fake_steps(monkeypatch, times):
    """step_seconds replaced: each call returns the next of ``times[layers]`` and is logged as (layers, busy)."""
    asked = []

    def step_seconds(ctx, layer, vocab, layers, loss="upcast", expected=None):
        asked.append((layers, ctx.busy))
        return times[layers].pop(0)

    monkeypatch.setattr(measure, "step_seconds", step_seconds)
    return asked


def test_retime_steps_interleaves_rounds_and_keeps_each_steps_median(monkeypatch):
    """Every step once a round, in the profile's order (the steps of one round see the same host pace), each
    replaced by the median of its rounds; busy times and memory peaks kept (the same work), nothing else asked
    of the profiler."""
    p = _op_profile()
    for r in p.points["step"]:
        r["busy_seconds"] = 0.5
    asked = _fake_steps(monkeypatch, {2: [3.0, 1.0, 2.0], 8: [9.0, 5.0, 7.0]})
    rows, ran = measure.retime_steps(p, torch.device("cpu"), rounds=3, progress=lambda _: None)
    assert asked == [(2, False), (8, False)] * 3
    assert [(r["layers"], r["seconds"]) for r in rows] == [(2, 2.0), (8, 7.0)]
    assert all(r["busy_seconds"] == 0.5 and "peak_reserved_bytes" in r for r in rows)
    assert ran["rounds"] == 3 and ran["round_spread"] == {"median": pytest.approx((3.0 + 9 / 5) / 2),
                                                          "max": 3.0}
    assert [r["seconds"] for r in p.points["step"]] != [2.0, 7.0]  # the profile given is left as it was


def test_retime_steps_keeps_whole_rounds_only_and_needs_two(monkeypatch):
    """An interrupt in the third round keeps the two whole rounds (the third's first step is dropped); an
    interrupt in the second leaves one, which is the single timing this replaces: refused, one line."""
    p = _op_profile()
    seq = {2: [1.0, 3.0, 100.0], 8: [4.0, 6.0]}

    def step_seconds(ctx, layer, vocab, layers, loss="upcast", expected=None):
        if not seq[layers]:
            raise KeyboardInterrupt
        return seq[layers].pop(0)

    monkeypatch.setattr(measure, "step_seconds", step_seconds)
    said = []
    rows, ran = measure.retime_steps(p, torch.device("cpu"), rounds=5, progress=said.append)
    assert [r["seconds"] for r in rows] == [2.0, 5.0] and ran["rounds"] == 2
    assert any("keeping the 2 rounds done" in line for line in said)
    seq.update({2: [1.0, 2.0], 8: [4.0]})
    with pytest.raises(profile.ProfileError, match=r"1 whole round\(s\) of 2 steps done; two or more"):
        measure.retime_steps(p, torch.device("cpu"), rounds=5, progress=lambda _: None)


def test_retime_steps_starts_no_round_the_time_left_cannot_hold(monkeypatch):
    """--seconds: after a round, another starts only while the time left is at least the longest round."""
    from types import SimpleNamespace

    p = _op_profile()
    now = [0.0]

    def step_seconds(ctx, layer, vocab, layers, loss="upcast", expected=None):
        now[0] += 10.0  # each step takes 10 s of the clock: a round 20 s
        return 1.0

    monkeypatch.setattr(measure, "step_seconds", step_seconds)
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    said = []
    rows, ran = measure.retime_steps(p, torch.device("cpu"), rounds=5, seconds=75, progress=said.append)
    assert ran["rounds"] == 3 and now[0] == 60.0, said  # 15 s left after the third: a round takes 20
    assert any("15 s left, a round takes 20 s; stopping after 3 rounds" in line for line in said)


def test_measure_times_whole_steps_in_interleaved_rounds_the_main_pass_the_first(monkeypatch):
    """The main pass times each step once (round 1, with its memory peaks); then step_rounds - 1 more rounds, every
    step once a round in the grid's order, before the busy pass; each step keeps the median of its rounds, and
    the device block says how many rounds ran and how far they spread."""
    order = []
    seq = {2: [5.0, 1.0, 3.0], 8: [20.0, 8.0, 9.0]}

    def step_seconds(ctx, layer, vocab, layers, loss="upcast", expected=None):
        order.append(layers)
        return seq[layers].pop(0)

    monkeypatch.setattr(measure, "step_seconds", step_seconds)
    p = _op_profile_rounds(4)
    assert order == [2, 8] * 3  # the main pass timed round 1 itself
    first = {r["layers"]: r for r in p.points["step"]}
    # round 1 is the main pass's real CPU timing of a 64-wide step, well under a second: the median of
    # (round 1, 5, 1, 3) is 2.0 and of (round 1, 20, 8, 9) 8.5
    assert first[2]["seconds"] == 2.0 and first[8]["seconds"] == 8.5
    assert p.device["step_rounds"] == 4 and p.device["step_spread"]["max"] > 20.0
    assert all(r["peak_reserved_bytes"] == 0 for r in p.points["step"])  # CPU: the main pass's peaks kept


def _op_profile_rounds(rounds):
    la = LayerShape(family="gpt", hidden=64, heads=4, kv_heads=4, ffn=256, seq=16, mb=1, ac="op")
    grid = Grid(layers=(la,), attention=(AttentionShape(head_dim=16, heads=4, seq=16),),
                embeddings=(), heads=(), optimizers=(),
                steps=(StepShape(layer=la, vocab=256, layers=2), StepShape(layer=la, vocab=256, layers=8)))
    return measure.measure(grid, torch.device("cpu"), precision="fp32", grid_name="t", progress=lambda _: None,
                           step_rounds=rounds)


def test_measure_with_one_step_round_times_each_step_once(monkeypatch):
    asked = []
    monkeypatch.setattr(measure, "step_seconds", lambda *a, **k: asked.append(1) or 1.0)
    p = _op_profile_rounds(1)
    assert asked == [] and p.device["step_rounds"] == 1 and "step_spread" not in p.device


def test_an_interrupt_in_the_step_rounds_keeps_whole_rounds_and_marks_the_run(monkeypatch):
    """Ctrl-C in the third step round (the second after the main pass): the rounds before it are kept, the cut
    one dropped, the run marked interrupted (so a --merge completes its busy times) and the busy pass not run."""
    seq = {2: [1.0, 100.0], 8: [2.0]}

    def step_seconds(ctx, layer, vocab, layers, loss="upcast", expected=None):
        if not seq[layers]:
            raise KeyboardInterrupt
        return seq[layers].pop(0)

    monkeypatch.setattr(measure, "step_seconds", step_seconds)
    monkeypatch.setattr(measure, "fill_busy", lambda *a, **k: pytest.fail("busy pass after an interrupt"))
    p = _op_profile_rounds(5)
    assert p.device["step_rounds"] == 2 and p.device["interrupted"] == "in step round 3 of 5"
    assert all(r["seconds"] < 100.0 for r in p.points["step"])  # the cut round's 100 s is not among the medians


def test_host_ratios_run_on_the_gpu_a_derived_source_prices(monkeypatch):
    """A source derived for the H100 SXM from an H200 profile may time its host-paced steps on an H100 80GB
    HBM3 (the steps stay host-paced under the derivation's factors; measure.host_ratios) or on the profile's own
    GPU; any other GPU is refused with both named."""
    from gpucomm.advisor.compute import derive

    p = _op_profile()
    p.device.update(type="cuda", name="NVIDIA H200")
    src = derive.derive(p, "h100-nvswitch")
    assert src.probe_gpus == ("NVIDIA H200", "NVIDIA H100 80GB HBM3")
    a, b = sorted(p.points["step"], key=lambda r: r["layers"])
    src.host_points = dict
    src.host_steps = lambda: {("gpt", "op"): (a, b, 1.0)}
    monkeypatch.setattr(measure, "step_seconds", lambda ctx, layer, vocab, layers, loss="upcast", expected=None:
                        {2: 10.0, 8: 40.0}[layers])
    monkeypatch.setattr(measure.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(measure.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(measure.torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr("gpucomm.env.collect_env", lambda *a, **k: type("E", (), {"host": {}})())
    for name in src.probe_gpus:
        monkeypatch.setattr(measure.torch.cuda, "get_device_name", lambda device=None, n=name: n)
        ratios, line = measure.host_ratios(src, repeats=1)
        here = src.marginal_s(a["layer"], a["vocab"], (2, 10.0), (8, 40.0))
        assert ratios == pytest.approx({("gpt", "op"): here}) and f"on the {name}" in line
        assert src.with_host(ratios, line).probe_gpus == src.probe_gpus
    monkeypatch.setattr(measure.torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    with pytest.raises(profile.ProfileError, match=r"^--host this: times the profile's host-paced steps on NVIDIA "
                                                   r"H200 or NVIDIA H100 80GB HBM3 and this machine's GPU is NVIDIA "
                                                   r"A100-SXM4-80GB; run it where such a GPU is, or leave --host out$"):
        measure.host_ratios(src, repeats=1)
