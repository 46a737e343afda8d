"""Compute profiles: the file round trip, lookups against hand-computed values, extrapolation, bad input."""

import json
import math

import pytest

from gpucomm import models
from gpucomm.advisor import hardware
from gpucomm.advisor.compute import profile as prof
from gpucomm.advisor.compute.profile import ProfileError, ProfileSource, _ew_bytes
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.precision import Precision

from ._profiles import ATTN, EMB, GEMM, HEAD, MARGIN, OPT, layer_shape, layer_time, rest_per_flop, synthetic


def _arch(family="llama", hidden=2048, layers=4, vocab=50304):
    heads = hidden // 128
    if family == "llama":
        return models.Architecture(name="t", layers=layers, hidden=hidden, heads=heads, kv_heads=max(1, heads // 4),
                                   ffn_hidden=3 * hidden, ffn_kind="swiglu", vocab=vocab, seq=1024,
                                   tied_embeddings=False)
    return models.Architecture(name="t", layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
                               ffn_hidden=4 * hidden, ffn_kind="gelu-4h", vocab=vocab, seq=1024, tied_embeddings=True,
                               learned_positions=True, biases=True)


def _job(arch, seq=1024, batch=1, **kw):
    return Job(arch=arch, profile=hardware.get("h200-nvswitch"), nodes=1, gpus_per_node=1, global_batch=batch,
               seq=seq, precision=Precision(), **kw)


def _layer_s(src, arch, layout, seq=1024):
    parts = src.parts(_job(arch, seq=seq, batch=layout.mb), layout)
    return (parts.t_mb - parts.t_head - parts.t_embedding) / parts.per_stage, parts


def test_a_measured_point_is_looked_up_as_it_was_measured():
    src = ProfileSource(synthetic())
    arch = _arch("llama", 2048)
    got, parts = _layer_s(src, arch, Layout(mb=4))
    s = layer_shape("llama", 2048, 4096)
    assert got == pytest.approx(sum(_synthetic_layer(s)))
    assert parts.extrapolated == ()
    assert parts.attn_fwd_s == pytest.approx(ATTN * s.attention().fwd_flops())
    assert parts.gemm_fwd_s == pytest.approx(GEMM * s.gemm_flops() / 3)


def _opt(s, layers, vocab=50304):
    """The synthetic optimizer's time over a whole step's parameters (``OPT`` seconds a parameter): what a step
    of ``layers`` layers spends in fused AdamW."""
    return OPT * prof._step_params(s, vocab, layers)


def _synthetic_layer(s):
    from ._profiles import layer_time

    return layer_time(s)


def test_between_token_counts_matmuls_per_flop_and_the_rest_per_byte_are_power_laws():
    """2,048 tokens between the measured 1,024 and 4,096: log-linear in tokens = the geometric mean, of the
    matmuls' seconds per FLOP (a constant here) and of the rest's seconds per byte of stored activations."""
    src = ProfileSource(synthetic())
    arch = _arch("gpt", 1024)
    got, parts = _layer_s(src, arch, Layout(mb=1), seq=2048)
    s = layer_shape("gpt", 1024, 2048)
    s = type(s)(**{**s.key(), "seq": 2048, "mb": 1})

    def per_byte(tokens):  # the synthetic layer's time beyond attention and its matmuls, per stored byte
        t = layer_shape("gpt", 1024, tokens)
        return (rest_per_flop(tokens) - GEMM) * t.gemm_flops() / _ew_bytes(t)

    want = (GEMM * s.gemm_flops() + math.sqrt(per_byte(1024) * per_byte(4096)) * _ew_bytes(s)
            + 3.5 * ATTN * s.attention().fwd_flops())
    assert got == pytest.approx(want)
    assert parts.extrapolated == ()


def test_the_rest_scales_with_activation_bytes_not_matmul_flops():
    """A narrower MLP and fewer KV heads than the measured layers cut the matmuls' FLOPs, not the norms, casts and
    residual adds: the rest is looked up per stored byte, so it shrinks less than the FLOPs do."""
    src = ProfileSource(synthetic())
    s = layer_shape("llama", 1024, 4096)
    narrow = type(s)(**{**s.key(), "ffn": 2 * 1024, "kv_heads": 2})
    lay = src._tables.layer(narrow, 1, "eager", [])
    a = narrow.attention()
    ew = lay.compute_s + lay.memory_s - GEMM * narrow.gemm_flops() - 3.5 * ATTN * a.fwd_flops()
    measured_per_byte = (rest_per_flop(4096) - GEMM) * s.gemm_flops() / _ew_bytes(s)
    assert ew == pytest.approx(measured_per_byte * _ew_bytes(narrow))
    assert _ew_bytes(narrow) / _ew_bytes(s) > narrow.gemm_flops() / s.gemm_flops()


def test_checkpointing_adds_the_forward_work_it_reruns_and_stops_before_the_last_matmul():
    """Hand computation from the mechanics (early-stopping torch.utils.checkpoint): the synthetic layer's
    forward is attention + rest / 3, its matmuls alone GEMM x FLOPs (a third forward), so its elementwise forward
    is rest / 3 - GEMM x FLOPs / 3.  full reruns all of it but the last matmul (w2: 3h x h of the layer's
    wq h x h, wk/wv h x h/4, wo h x h, w1/w3/w2 h x 3h: 11.5 h^2); op reruns the elementwise forward and wk, wo,
    w3 (0.25 + 1 + 3 = 4.25 h^2); selective reruns attention's forward alone."""
    src = ProfileSource(synthetic())
    arch = _arch("llama", 2048)
    base, _ = _layer_s(src, arch, Layout(mb=4))
    s = layer_shape("llama", 2048, 4096)
    attn_fwd = ATTN * s.attention().fwd_flops()
    rest = rest_per_flop(4096) * s.gemm_flops()
    gemm_fwd = GEMM * s.gemm_flops() / 3
    ew_fwd = rest / 3 - gemm_fwd
    want = {"full": attn_fwd + ew_fwd + gemm_fwd * (11.5 - 3) / 11.5,
            "op": ew_fwd + gemm_fwd * 4.25 / 11.5,
            "selective": attn_fwd}
    for ac, extra in want.items():
        got, _ = _layer_s(src, arch, Layout(mb=4, ac=ac))
        assert got - base == pytest.approx(extra), ac


def test_the_hosts_time_is_the_median_of_the_host_bound_points():
    """A point is host-bound when the device work the lookups price at its shape fills less than half its
    measured time; the host's time of its (family, mode) is the median of those points' times."""
    p = synthetic()
    ops = [r for r in p.points["layer"] if r["family"] == "gpt" and r["ac"] == "op"]
    walls = []
    for r, k in zip(ops[:3], (3.0, 4.0, 10.0), strict=True):  # three host-bound points (k x their device time)
        t = r["fwd_s"] + r["bwd_s"]
        r["fwd_s"], r["bwd_s"] = k * r["fwd_s"], k * r["bwd_s"]
        walls.append(k * t)
    ops[3]["bwd_s"] += 0.5 * (ops[3]["fwd_s"] + ops[3]["bwd_s"])  # 1.5 x: not host-bound
    src = ProfileSource(p)
    parts = src.parts(_job(_arch("gpt", 1024)), Layout(mb=1, ac="op"))
    assert parts.host_layer_s == pytest.approx(sorted(walls)[1])
    # a mode whose measured points are none host-bound, and fused stacks, leave the host out (the device
    # outlasts the host at every measured point of the mode: nothing extrapolated to say)
    full = src.parts(_job(_arch("gpt", 1024)), Layout(mb=1, ac="full"))
    assert full.host_layer_s == 0 and not any("host" in n for n in full.extrapolated)
    fused = src.parts(_job(_arch("gpt", 1024), software="fused"), Layout(mb=1, ac="op"))
    assert fused.host_layer_s == 0


def test_busy_times_price_the_device_where_a_profile_has_them():
    """A point's device time is its kernels' busy time where measured (``busy_<key>``): a host-paced small point
    timed alone would otherwise price its layer at the host's pace.  Busy times half the measured ones halve
    every layer lookup; the host-bound test still reads the measured time."""
    p = synthetic()
    for kind, keys in (("layer", ("fwd_s", "bwd_s")), ("kernels", ("gemm_fwd_s", "gemm_bwd_s")),
                       ("attention", ("fwd_s", "bwd_s"))):
        for r in p.points[kind]:
            r.update({f"busy_{k}": 0.5 * r[k] for k in keys})
    arch, lo = _arch("llama", 2048), Layout(mb=4)
    before, _ = _layer_s(ProfileSource(synthetic()), arch, lo)
    got, parts = _layer_s(ProfileSource(p), arch, lo)
    assert got == pytest.approx(0.5 * before)
    assert parts.attn_fwd_s == pytest.approx(0.5 * ATTN * layer_shape("llama", 2048, 4096).attention().fwd_flops())
    assert prof.device_s({"fwd_s": 2.0}, "fwd_s") == 2.0 and prof.device_s({"fwd_s": 2.0, "busy_fwd_s": 1.5},
                                                                           "fwd_s") == 1.5


def test_a_busy_time_above_the_measured_time_prices_the_measured_time_and_is_counted():
    """The device cannot be busy longer than the interval the same work took: a busy time above it was read
    by the two passes' noise or a GPU slower in the busy pass, so the lookups take the measured time, and
    :func:`busy_above` counts such points per kind for ``gpucomm measure`` to say."""
    assert prof.device_s({"fwd_s": 2.0, "busy_fwd_s": 2.2}, "fwd_s") == 2.0
    p = synthetic()
    for kind, keys in prof.BUSY_KEYS.items():
        for r in p.points[kind]:
            r.update({f"busy_{k}": 0.9 * r[k] for k in keys})
    assert prof.busy_above(p) == {k: (0, len(p.points[k])) for k in prof.BUSY_KEYS}
    before, _ = _layer_s(ProfileSource(p), _arch("llama", 2048), Layout(mb=4))
    for r in p.points["layer"]:
        r["busy_bwd_s"] = 1.2 * r["bwd_s"]  # every layer's backward read 20% slow: priced as measured
    p.points["kernels"][0]["busy_gemm_fwd_s"] = 1.01 * p.points["kernels"][0]["gemm_fwd_s"]
    got, _ = _layer_s(ProfileSource(p), _arch("llama", 2048), Layout(mb=4))
    assert prof.busy_above(p)["layer"] == (len(p.points["layer"]),) * 2
    assert prof.busy_above(p)["kernels"] == (1, len(p.points["kernels"]))
    assert prof.busy_above(p)["attention"][0] == 0
    assert before < got < before / 0.9  # the backward's rest now at its measured time, the rest of it as before


def test_a_mode_with_whole_steps_takes_its_host_time_from_them_not_from_isolated_points():
    """Isolated points overstate a layer's host time in a step; where whole steps of a (family, mode) were
    measured at two layer counts and none is host-paced, the host's time of that mode is none, however
    host-bound its isolated points are."""
    p = synthetic()
    for r in p.points["layer"]:
        if r["family"] == "gpt" and r["ac"] == "full":  # host-bound alone: 10 x their device time
            r["fwd_s"], r["bwd_s"] = 10 * r["fwd_s"], 10 * r["bwd_s"]
    assert ProfileSource(p)._tables._host[("gpt", "full")] > 0
    s = layer_shape("gpt", 1024, 4096, ac="full")
    device = ProfileSource(p)._tables.layer(s, 1, "eager", [])
    for n in (2, 8):
        p.points["step"].append({"layer": s.key(), "vocab": 50304, "layers": n, "loss": "upcast",
                                 "seconds": 0.040 + _opt(s, n) + n * (device.compute_s + device.memory_s),
                                 "peak_allocated_bytes": 2**30, "peak_reserved_bytes": 2**30})
    src = ProfileSource(p)
    assert ("gpt", "full") not in src._tables._host
    assert src.parts(_job(_arch("gpt", 1024)), Layout(mb=1, ac="full")).host_layer_s == 0


def test_outside_the_grid_the_answer_says_extrapolated_and_holds_the_per_flop_time():
    src = ProfileSource(synthetic())
    arch = _arch("llama", 2048)
    got, parts = _layer_s(src, arch, Layout(mb=16))  # 16,384 tokens, above the measured 4,096
    s = type(layer_shape("llama", 2048, 4096))(**{**layer_shape("llama", 2048, 4096).key(), "mb": 16})
    assert got == pytest.approx(rest_per_flop(4096) * s.gemm_flops() + 3.5 * ATTN * s.attention().fwd_flops())
    assert any("tokens 16,384 outside the measured 1,024-4,096" in n for n in parts.extrapolated)


def test_head_embedding_and_optimizer_are_per_flop_and_per_byte_constants():
    src = ProfileSource(synthetic())
    arch = _arch("gpt", 2048)
    job = _job(arch, batch=4)
    parts = src.parts(job, Layout(mb=4))
    tokens = 4096
    assert parts.t_head == pytest.approx(HEAD * 6 * tokens * 2048 * 50304)
    emb = EMB * (8 * 50304 * 2048 + 8 * tokens * 2048)
    own = parts.t_embedding - emb  # the steps' own work: 1 s measured minus their parts
    assert own == pytest.approx(_step_residual(src, arch), rel=1e-9)
    opt = src.optimizer_s(job, 5e7)
    assert opt.value == pytest.approx(OPT * 5e7) and opt.extrapolated == ()
    assert src.optimizer_s(job, 1e10).extrapolated  # above the measured parameter counts


def _step_residual(src, arch):
    rows = src._tables._steps["gpt"]
    return next(own for (h, t), own, _ in rows if (h, t) == (2048, 4096))


def test_the_allocator_margin_is_per_byte_of_fp32_logits():
    src = ProfileSource(synthetic())
    arch = _arch("gpt", 1024)
    m = src.margin_bytes(_job(arch, batch=4), Layout(mb=4))
    assert m.value == pytest.approx(MARGIN * 4 * 4096 * 50304) and m.extrapolated == ()


def test_round_trip_save_load_gives_identical_lookups(tmp_path):
    p = synthetic()
    path = tmp_path / "p.json"
    prof.save(p, path)
    q = prof.load(path)
    arch = _arch("llama", 1536)
    for lay in (Layout(mb=2), Layout(mb=3, ac="op"), Layout(tp=2, mb=1)):
        a = ProfileSource(p).parts(_job(arch, batch=lay.mb), lay)
        b = ProfileSource(q).parts(_job(arch, batch=lay.mb), lay)
        assert a == b
    assert q.to_json() == json.loads(path.read_text())


@pytest.mark.parametrize("text, words", [
    ("{not json", "not JSON"),
    ('{"kind": "env", "schema_version": 1}', "not a compute profile (kind 'env'"),
    ("[1, 2]", "not a compute profile (kind 'list'"),
    ('{"kind": "gpucomm-compute-profile", "schema_version": 7}', "schema_version 7, expected 1"),
    ('{"kind": "gpucomm-compute-profile", "schema_version": 1, "device": {"name": "x"}, "software": "eager", '
     '"points": {"layer": [{"family": "gpt"}]}}', "points['layer'][0] lacks hidden"),
    ('{"kind": "gpucomm-compute-profile", "schema_version": 1, "device": {"name": "x"}, "software": "eager", '
     '"points": {"optimizer": [{"params": 1, "seconds": -1}]}}', "expected seconds >= 0"),
])
def test_bad_files_are_one_line_naming_the_flag_and_the_fix(tmp_path, text, words):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ProfileError) as e:
        prof.load(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"--compute-profile {path}") and words in msg
    assert "gpucomm measure" in msg


def test_a_missing_file_names_the_path():
    with pytest.raises(ProfileError, match=r"--compute-profile /nonexistent/p.json: cannot be read"):
        prof.load("/nonexistent/p.json")


def test_a_profile_from_another_gpu_is_refused():
    p = synthetic(gpu="NVIDIA A100-SXM4-80GB")
    prof.check_hardware(p, "a100-nvlink3")
    with pytest.raises(ProfileError, match=r"measured on 'NVIDIA A100-SXM4-80GB', but --hardware h200-nvswitch is "
                                           r"H200; measure this GPU"):
        prof.check_hardware(p, "h200-nvswitch")
    with pytest.raises(ProfileError, match="--hardware cpu-gloo is cpu"):
        prof.check_hardware(p, "cpu-gloo", "cpu-gloo")


def test_the_two_h100_parts_do_not_price_each_other():
    """A profile measured on the 80 GB HBM3 H100 (what a lent H100 reads) prices h100-nvswitch, not the 96 GB HBM2e
    part at 500 W (h100-96gb-nvswitch), and the other way round."""
    h80 = synthetic(gpu="NVIDIA H100 80GB HBM3")
    prof.check_hardware(h80, "h100-nvswitch")
    with pytest.raises(ProfileError, match=r"measured on 'NVIDIA H100 80GB HBM3', but --hardware h100-96gb-nvswitch "
                                           r"is H100 96GB"):
        prof.check_hardware(h80, "h100-96gb-nvswitch")
    h96 = synthetic(gpu="NVIDIA H100 96GB HBM2e")
    prof.check_hardware(h96, "h100-96gb-nvswitch")
    with pytest.raises(ProfileError, match="is H100 80GB"):
        prof.check_hardware(h96, "h100-nvswitch")


def test_shapes_the_profile_cannot_answer_are_refused_with_the_fix():
    src = ProfileSource(synthetic(families=("gpt",), acs=("none",)))
    with pytest.raises(ProfileError, match=r"no llama layers measured, and nothing to extrapolate from; measure them: "
                                           r"gpucomm measure --arch"):
        src.parts(_job(_arch("llama", 2048)), Layout())
    # a checkpointing mode without points is priced by its mechanics; the answer says its host time is missing
    parts = src.parts(_job(_arch("gpt", 2048)), Layout(ac="full"))
    assert any("gpt layers with ac=full: no point measured; the host's time is left out" in n
               for n in parts.extrapolated)
    # a mode whose points were measured and none host-paced: the device outlasts the host there, nothing to say
    measured = ProfileSource(synthetic(families=("gpt",), acs=("none", "full")))
    parts = measured.parts(_job(_arch("gpt", 2048)), Layout(ac="full"))
    assert not any("host's time" in n for n in parts.extrapolated)


def test_software_and_dtype_the_profile_did_not_measure_are_refused():
    src = ProfileSource(synthetic())
    arch = _arch("gpt", 1024)
    with pytest.raises(ProfileError, match=r"--software compiled: the compute profile synthetic.json measured eager; "
                                           r"measure one with gpucomm measure --software compiled"):
        src.parts(_job(arch, software="compiled"), Layout())
    with pytest.raises(ProfileError, match=r"--dtype fp32: the compute profile synthetic.json measured bf16"):
        src.parts(Job(arch=arch, profile=hardware.get("h200-nvswitch"), nodes=1, gpus_per_node=1, global_batch=1,
                      seq=1024, precision=Precision(compute="fp32")), Layout())


def test_fused_software_replaces_the_eager_elementwise_time_by_fused_traffic():
    src = ProfileSource(synthetic())
    arch = _arch("llama", 2048)
    eager, _ = _layer_s(src, arch, Layout(mb=4))
    fused_parts = src.parts(_job(arch, batch=4, software="fused"), Layout(mb=4))
    fused = (fused_parts.t_mb - fused_parts.t_head - fused_parts.t_embedding) / fused_parts.per_stage
    s = layer_shape("llama", 2048, 4096)
    # matmuls as measured alone + attention + 3 passes over 2 + 8 f/h + ... stored bytes at 4,000 GB/s
    from gpucomm.advisor.memory import activation_terms

    stored = sum(activation_terms(arch, "none").values())
    ew = 3.0 * stored * 2048 * 4096 / 4000e9
    other = (rest_per_flop(4096) - GEMM) * s.gemm_flops()  # the eager layer's time beyond matmuls and attention
    assert ew < other
    assert fused == pytest.approx(GEMM * s.gemm_flops() + 3.5 * ATTN * s.attention().fwd_flops() + ew)
    assert fused < eager
    assert fused_parts.t_embedding == pytest.approx(EMB * (8 * 50304 * 2048 + 8 * 4096 * 2048))  # no host work


def test_whole_steps_at_two_layer_counts_give_the_hosts_time_inside_a_step():
    """Where a shape's whole steps were measured at 2 and 8 layers, the host's time of a layer is the marginal
    time ``(t8 - t2) / 6`` (the fixed parts cancel) when that is host-bound; it replaces the isolated points'."""
    p = synthetic()
    ops = [r for r in p.points["layer"] if r["family"] == "gpt" and r["ac"] == "op"]
    for r in ops[:3]:  # isolated points, host-bound at 10 x their device time
        r["fwd_s"], r["bwd_s"] = 10 * r["fwd_s"], 10 * r["bwd_s"]
    s = layer_shape("gpt", 1024, 4096, ac="op")
    device = layer_time(layer_shape("gpt", 1024, 4096))
    host = 5 * sum(device)  # host-bound: the device fills a fifth of it
    for n, t in ((2, 0.040 + _opt(s, 2) + 2 * host), (8, 0.040 + _opt(s, 8) + 8 * host)):
        p.points["step"].append({"layer": s.key(), "vocab": 50304, "layers": n, "loss": "upcast", "seconds": t,
                                 "peak_allocated_bytes": 2**30, "peak_reserved_bytes": 2**30})
    src = ProfileSource(p)
    parts = src.parts(_job(_arch("gpt", 1024)), Layout(mb=1, ac="op"))
    assert parts.host_layer_s == pytest.approx(host)
    # a marginal time the device fills is not the host's: the isolated points' median stays
    q = synthetic()
    for n, t in ((2, 0.040 + _opt(s, 2) + 2 * sum(device)), (8, 0.040 + _opt(s, 8) + 8 * sum(device))):
        q.points["step"].append({"layer": s.key(), "vocab": 50304, "layers": n, "loss": "upcast", "seconds": t,
                                 "peak_allocated_bytes": 2**30, "peak_reserved_bytes": 2**30})
    assert ProfileSource(q)._tables._step_host == {}
    # host-paced with the device filling more than half of it (the first H200 profile's op steps: 3.7-7.3 ms
    # a layer over 1.9-4.4 ms of device work): still the host's, not the isolated points'
    r = synthetic()
    op_device = ProfileSource(r)._tables.layer(s, 1, "eager", [])
    paced = 1.5 * (op_device.compute_s + op_device.memory_s)
    for n, t in ((2, 0.040 + _opt(s, 2) + 2 * paced), (8, 0.040 + _opt(s, 8) + 8 * paced)):
        r.points["step"].append({"layer": s.key(), "vocab": 50304, "layers": n, "loss": "upcast", "seconds": t,
                                 "peak_allocated_bytes": 2**30, "peak_reserved_bytes": 2**30})
    assert ProfileSource(r)._tables._step_host[("gpt", "op")] == pytest.approx(paced)


def test_another_host_scales_the_hosts_time_of_each_family_and_says_so():
    """``--host this``: the host's time of a layer is the profile's times this host's ratio, per (family, mode);
    the device's work is untouched, and the ratio's line is among the assumptions."""
    p = synthetic()
    for r in p.points["layer"]:  # host-paced op points, 10 x their device time
        if r["ac"] == "op":
            r["fwd_s"], r["bwd_s"] = 10 * r["fwd_s"], 10 * r["bwd_s"]
    src = ProfileSource(p)
    job, lo = _job(_arch("gpt", 1024), batch=1), Layout(mb=1, ac="op")
    base = src.parts(job, lo)
    assert base.host_layer_s > 0
    here = src.with_host({("gpt", "op"): 0.6, ("gpt", "full"): 5.0}, "host: this one")
    scaled = here.parts(job, lo)
    assert scaled.host_layer_s == pytest.approx(0.6 * base.host_layer_s)
    assert scaled.t_mb == pytest.approx(base.t_mb)
    assert "host: this one" in here.assumptions(job)
    # the points it re-times: per family, the op point at tp 1 with the least device work
    pts = src.host_points()
    assert set(pts) == {"gpt", "llama"}
    assert all(r["ac"] == "op" and r["tp"] == 1 and r["hidden"] == 1024 and r["mb"] == 1 for r in pts.values())



def test_a_layer_inside_whole_steps_runs_at_its_marginal_time_and_is_not_the_hosts():
    """Whole ``none`` steps of one shape at 2 and 24 layers whose marginal layer time is 1.05 x the device work
    the lookups price: every layer of that family is priced 1.05 x (the step's own work computed the same way),
    and a marginal under 1/0.8 of the device's work is not taken for the host's time."""
    p = synthetic()
    s = layer_shape("gpt", 1024, 4096)
    device = ProfileSource(synthetic())._tables.layer(s, 1, "eager", [])
    per = 1.05 * (device.compute_s + device.memory_s)
    for n in (2, 24):
        p.points["step"].append({"layer": s.key(), "vocab": 50304, "layers": n, "loss": "upcast",
                                 "seconds": 0.040 + _opt(s, n) + n * per, "peak_allocated_bytes": 2**30,
                                 "peak_reserved_bytes": 2**30})
    src = ProfileSource(p)
    assert src._tables.in_step(s) == pytest.approx(1.05)
    assert src._tables.in_step(layer_shape("gpt", 2048, 1024, ac="op")) == pytest.approx(1.05)  # held, as none
    assert ("gpt", "none") not in src._tables._host
    lo = Layout(mb=4)
    before = _layer_s(ProfileSource(synthetic()), _arch("gpt", 1024), lo)[0]  # a profile without those steps
    assert _layer_s(src, _arch("gpt", 1024), lo)[0] == pytest.approx(1.05 * before)
