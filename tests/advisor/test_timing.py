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


def test_tensor_parallel_collectives_per_layer_by_checkpointing():
    # with sequence parallel: 4 all-reduce equivalents per layer; full recompute repeats the forward's 2;
    # torchtitan's op policy keeps the reduce-scatter outputs and repeats the 2 all-gathers (half each)
    def tp_s(ac):
        return step_time(models.get("llama3-8b"), Layout(tp=8, mb=2, ac=ac), hardware.get("h100-nvswitch"),
                         global_batch=2, seq=8192, gpus_per_node=8).tp_s

    base = tp_s("none")
    assert base > 0 and tp_s("selective") == pytest.approx(base)
    assert tp_s("op") == pytest.approx(base * 5 / 4) and tp_s("full") == pytest.approx(base * 6 / 4)
