"""Step-time terms of the planner that follow from activation checkpointing, by hand."""

import pytest

from gpucomm import models
from gpucomm.advisor import hardware
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.timing import step_time


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
