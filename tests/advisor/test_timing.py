"""Step-time terms of the planner that follow from activation checkpointing, by hand."""

import pytest

from gpucomm import models
from gpucomm.advisor import hardware, timing
from gpucomm.advisor.compute import source
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.precision import Precision


@pytest.fixture(autouse=True)
def _datasheet_compute(monkeypatch):
    """These hand computations are of the datasheet compute model (peak x efficiency x size factor): keep the
    shipped measured H200 profile, from which h100-nvswitch now derives, out of them."""
    monkeypatch.setattr(source, "shipped", lambda name: None)


def step_time(arch, layout, profile, *, global_batch, seq, gpus_per_node, kernels="fused", dtype="bf16"):
    """The planner's step with 16-bit weights (ZeRO's mixed precision: what these hand computations assume)."""
    job = Job(arch=arch, profile=profile, nodes=1, gpus_per_node=gpus_per_node, global_batch=global_batch, seq=seq,
              precision=Precision(compute=dtype, weights=dtype), kernels=kernels)
    return timing.step_time(job, layout)


def _t(ac: str):
    return step_time(models.get("llama3-8b"), Layout(dp=8, shard="fsdp", mb=2, ac=ac),
                     hardware.get("h100-nvswitch"), global_batch=16, seq=8192, gpus_per_node=8)


def test_op_policy_recomputes_every_second_matmul_and_the_memory_bound_forward():
    none, op = _t("none"), _t("op")
    p = hardware.get("h100-nvswitch")
    tokens, layers = 2 * 8192, 32
    # wk (h -> kv), wo (h -> h), w3 (h -> f): the 2nd, 4th and 6th matmul of a Llama block, forward only
    mm = 2 * (4096 * 1024 + 4096 * 4096 + 4096 * 14336) * tokens * layers
    ew = 41 * 4096 * tokens * layers  # one more pass over the 41 s b h bytes a Llama-3-8B layer stores
    extra = mm / (p.peak_flops("bf16") * none.efficiency) + ew / (p.memory_bw_gbps * 1e9)
    assert none.micro_batches == op.micro_batches == 1
    assert op.compute_s - none.compute_s == pytest.approx(extra)


def test_megatron_selective_recomputes_attention_only_and_full_costs_most():
    none, sel, op, full = _t("none"), _t("selective"), _t("op"), _t("full")
    p = hardware.get("h100-nvswitch")
    attn_fwd = 2 * 8192 * 4096 * (2 * 8192) * 32  # causal Q K^T and A V, forward, 32 layers
    assert sel.compute_s - none.compute_s == pytest.approx(attn_fwd / (p.peak_flops("bf16")
                                                                       * p.attention_efficiency))
    assert none.compute_s < sel.compute_s < op.compute_s < full.compute_s


def test_tensor_parallel_collectives_per_layer_by_checkpointing():
    # with sequence parallel: 4 all-reduce equivalents per layer; full recompute repeats the forward's 2;
    # torchtitan's op policy keeps the reduce-scatter outputs and repeats the 2 all-gathers (half each)
    def tp_s(ac):
        return step_time(models.get("llama3-8b"), Layout(tp=8, mb=2, ac=ac), hardware.get("h100-nvswitch"),
                         global_batch=2, seq=8192, gpus_per_node=8).tp_s

    base = tp_s("none")
    assert base > 0 and tp_s("selective") == pytest.approx(base)
    assert tp_s("op") == pytest.approx(base * 5 / 4) and tp_s("full") == pytest.approx(base * 6 / 4)


def test_unfused_layer_bytes_by_hand_for_megatron_2019_gpt():
    from gpucomm.advisor.timing import unfused_layer_bytes

    arch = models.Architecture(name="gpt2-1.2b", layers=40, hidden=1536, heads=16, kv_heads=16, ffn_hidden=6144,
                               ffn_kind="gelu-4h", vocab=51200, seq=1024, tied_embeddings=True,
                               learned_positions=True, biases=True, dropout=True)
    h, S = 1536, 2 * 16 * 1024  # one fp16 pass over a token's scores on one GPU
    u = unfused_layer_bytes(arch, 1024, 1)
    # forward: outside TP 38h (2 LN 4h, 2 residual 6h, 2 bias 4h, 2 dropout 5h) + inside 60h
    # (QKV bias 12h, Q/K/V copies 12h, context copy 4h, 4h-bias 16h, GeLU 16h); backward 38h + 54h
    assert u.fwd == 98 * h and u.bwd == 92 * h
    assert u.scores_fwd == 10.5 * S and u.scores_bwd == 9.5 * S
    assert (u.scores_gemm_fwd, u.scores_gemm_bwd) == (2 * S, 4 * S)
    t8 = unfused_layer_bytes(arch, 1024, 8)  # inside the TP region / 8, outside replicated at full width
    assert t8.fwd == 38 * h + 60 * h / 8 and t8.scores_fwd == 10.5 * S / 8


def test_unfused_kernels_add_the_derived_traffic_to_the_step():
    arch = models.Architecture(name="gpt2-1.2b", layers=40, hidden=1536, heads=16, kv_heads=16, ffn_hidden=6144,
                               ffn_kind="gelu-4h", vocab=51200, seq=1024, tied_embeddings=True,
                               learned_positions=True, biases=True, dropout=True)
    p = hardware.get("v100-dgx2h")
    kw = dict(global_batch=8, seq=1024, gpus_per_node=1, dtype="fp16")
    fused = step_time(arch, Layout(mb=8, ac="full"), p, **kw)
    unfused = step_time(arch, Layout(mb=8, ac="full"), p, kernels="unfused", **kw)
    h, S, tokens, layers, bw = 1536, 2 * 16 * 1024, 8 * 1024, 40, 900e9
    # fused: 3 + 1 (recompute) passes over 34 h stored bytes, 16 B per logit, causal flash attention
    fused_ew = (4 * 34 * h * layers + 16 * 51200) * tokens / bw
    fused_attn = 4 * 2 * 1024 * h * tokens * layers / (p.peak_flops("fp16") * 0.60)
    # unfused: forward twice (recompute), backward once, scores' elementwise passes, the loss at 60 B per logit;
    # the whole square's matmuls at the GEMM rate (they beat the bandwidth of their 8 S score bytes here)
    ew = ((2 * 98 * h + 92 * h) + (2 * 10.5 + 9.5) * S) * tokens * layers + 60 * 51200 * tokens
    square = 4 * 4 * 1024 * h * tokens * layers / (p.peak_flops("fp16") * fused.efficiency)
    assert square > 8 * S * tokens * layers / bw
    assert unfused.step_s - fused.step_s == pytest.approx(ew / bw + square - fused_ew - fused_attn)
    with pytest.raises(ValueError, match="--kernels 'cuda'"):
        step_time(arch, Layout(mb=8), p, kernels="cuda", **kw)


def test_overlapped_tp_exposes_only_what_the_gemms_do_not_hide():
    from gpucomm.advisor.timing import tp_exposed_s

    arch = models.get("llama3-8b")
    ar, g = 1.0e-3, 4.0e-3  # one all-reduce equivalent, one layer's forward GEMMs (s)
    assert tp_exposed_s(ar, g, 8, "none", arch, False) == 4 * ar
    # forward: 2 ar against 7/8 g = 3.5 ms (hidden); backward: 2 ar against 2 g 7/8 (hidden)
    assert tp_exposed_s(ar, g, 8, "none", arch, True) == 0.0
    slow = 5.0e-3  # collectives slower than the GEMMs: only the excess is exposed
    assert tp_exposed_s(slow, g, 8, "none", arch, True) == pytest.approx((2 * slow - g * 7 / 8)
                                                                         + (2 * slow - 2 * g * 7 / 8))
    # full recomputation: 2 more forward collectives, and the recomputed forward GEMMs hide them too
    assert tp_exposed_s(slow, g, 8, "full", arch, True) == pytest.approx((4 * slow - 2 * g * 7 / 8)
                                                                         + (2 * slow - 2 * g * 7 / 8))


def test_resharding_sets_how_often_fsdp_gathers():
    from gpucomm.advisor.timing import gathered_exposed_s

    ag, rs, fwd, bwd, units, m = 3.0, 2.0, 1.0, 2.0, 10, 4
    edge = (ag + rs) / units
    assert gathered_exposed_s(ag, rs, fwd, bwd, units, m, "fwd") == (m * (2.0 + 3.0 + edge), m * 8.0)
    assert gathered_exposed_s(ag, rs, fwd, bwd, units, m, "bwd") == (m * (2.0 + 0.0 + edge), m * 5.0)
    assert gathered_exposed_s(ag, rs, fwd, bwd, units, m, "step") == (2.0 + 0.0 + edge, 5.0)


def test_the_bubble_comes_from_the_real_stage_sizes():
    arch, p = models.get("llama3-8b"), hardware.get("h100-nvswitch")
    kw = dict(global_batch=64, seq=8192, gpus_per_node=8)
    even = step_time(arch, Layout(tp=2, pp=4, dp=1, mb=1, ac="full"), p, **kw)
    # the last stage also runs the head and the loss (128256 x 4096: about 2.4 layers of matmuls): two layers
    # fewer there shorten the slowest stage
    light = step_time(arch, Layout(tp=2, pp=4, dp=1, mb=1, ac="full", stages=(9, 9, 8, 6)), p, **kw)
    assert light.step_s < even.step_s
    # 1F1B: the step is m slots of the slowest stage plus the sum of the other stages' times (the bubble);
    # interleaving divides the bubble by vpp
    inter = step_time(arch, Layout(tp=2, pp=4, dp=1, mb=1, ac="full", vpp=2), p, **kw)
    assert inter.bubble_s == pytest.approx(even.bubble_s / 2)
    slot = (even.step_s - even.bubble_s - even.p2p_s - even.dp_exposed_s - even.optimizer_s) / 64
    assert even.bubble_s < 3 * slot  # three stages without the head: less than three slowest-stage slots


def test_calibrated_collectives_reach_tensor_parallel_too():
    import dataclasses

    arch, p = models.get("llama3-8b"), hardware.get("h100-nvswitch")
    kw = dict(global_batch=16, seq=8192, gpus_per_node=2)
    base = step_time(arch, Layout(tp=2, mb=1), p, **kw)
    slow = dataclasses.replace(p, calibration={"collective_points": [
        {"op": "all_reduce", "n": 2, "scope": "process", "points": [[0, 1e5], [2**40, 1e5]]}]})  # 0.1 s each
    calibrated = step_time(arch, Layout(tp=2, mb=1), slow, **kw)
    # 4 all-reduce equivalents per layer per micro-batch, 32 layers, 16 micro-batches, at 0.1 s each
    assert calibrated.tp_s == pytest.approx(4 * 32 * 16 * 0.1) and base.tp_s < calibrated.tp_s


def test_a_host_bound_step_takes_the_hosts_time_and_pipeline_slots_the_longer_of_the_two():
    """Hand computation (timing module docstring, **Host**): one GPU, 4 layers, 2 micro-batches, the device
    1 ms a layer + 3 ms head and loss, a 2 ms optimizer step; the host needs 5 ms a layer: the step is
    2 x 4 x 5 = 40 ms of host where the device needs 2 x 7 + 2 = 16 ms."""
    import dataclasses

    from gpucomm.advisor.compute.parts import ComputeParts

    arch = dataclasses.replace(models.get("gpt-124m"), layers=4)
    job = Job(arch=arch, profile=hardware.get("h200-nvswitch"), nodes=1, gpus_per_node=1, global_batch=2,
              seq=1024, precision=Precision())
    parts = ComputeParts(t_mb=7e-3, t_head=3e-3, gemm_fwd_s=0.0, attn_fwd_s=0.0, per_stage=4, fixed_s=2e-3,
                         host_layer_s=5e-3)
    st = timing._assemble(job, Layout(mb=1), parts)
    assert st.step_s == pytest.approx(40e-3) and st.host_wait_s == pytest.approx(40e-3 - 16e-3)
    fast = timing._assemble(job, Layout(mb=1), dataclasses.replace(parts, host_layer_s=1e-3))
    assert fast.host_wait_s == 0 and fast.step_s == pytest.approx(16e-3)  # device-bound: untouched
    # two pipeline stages of 2 layers synchronise every micro-batch: each slot is max(device, host)
    job2 = dataclasses.replace(job, nodes=1, gpus_per_node=2)
    two = timing._assemble(job2, Layout(pp=2, mb=1), dataclasses.replace(parts, per_stage=2, t_mb=5e-3))
    assert two.host_wait_s == 0
    assert two.step_s - two.p2p_s - two.optimizer_s == pytest.approx(2 * 10e-3 + 10e-3)  # 2 slots + bubble
