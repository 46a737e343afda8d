"""Memory terms against hand-computed values from the cited formulas (Korthikanti et al. 2022; ZeRO)."""

import pytest

from gpucomm import models
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.memory import BUCKET_BYTES, RESERVE_BYTES, activation_bytes_per_layer, memory

S, B, H, A = 2048, 4, 12288, 96  # GPT-3 175B, micro-batch 4


def test_korthikanti_no_recompute_keeps_the_score_term_without_flash():
    # s*b*h*(34 + 5*a*s/h) bytes, one layer
    assert activation_bytes_per_layer(S, B, H, A, 1, "none", flash=False) == S * B * H * (34 + 5 * A * S / H)


def test_korthikanti_tensor_and_sequence_parallel_divides_by_t():
    assert activation_bytes_per_layer(S, B, H, A, 8, "none", flash=False) == S * B * H / 8 * (34 + 5 * A * S / H)


def test_korthikanti_selective_and_full():
    assert activation_bytes_per_layer(S, B, H, A, 8, "selective") == S * B * H * 34 / 8
    assert activation_bytes_per_layer(S, B, H, A, 8, "full") == 2 * S * B * H / 8
    # flash attention never stores the scores: "none" keeps what selective keeps
    assert activation_bytes_per_layer(S, B, H, A, 1, "none") == 34 * S * B * H


def test_fsdp_terms_for_llama3_70b_on_64_gpus():
    arch = models.get("llama3-70b")
    lo = Layout(dp=64, shard="fsdp", mb=1, ac="full")
    m = memory(arch, lo, global_batch=64, seq=8192, gpus_per_node=8)
    psi = arch.params()
    assert m.params == pytest.approx(2 * psi / 64)
    assert m.grads == pytest.approx(2 * psi / 64)
    assert m.optimizer == pytest.approx(12 * psi / 64)
    # full recompute: every layer's input, plus one layer's working set while it is recomputed
    assert m.activations == pytest.approx(80 * 2 * 8192 * 8192 + 34 * 8192 * 8192)
    assert m.logits == pytest.approx(4 * 8192 * arch.vocab)
    assert m.buffers == pytest.approx(6 * arch.layer_params())  # 2 gathered layers (bf16) + 1 layer of grads
    assert m.reserve == RESERVE_BYTES
    assert m.total == pytest.approx(sum(m.as_dict().values()))


def test_zero_stages_shard_what_the_paper_says():
    arch = models.get("gpt-350m")
    psi = arch.params()
    terms = {s: memory(arch, Layout(dp=8, shard=s, mb=1), global_batch=8, seq=1024, gpus_per_node=8)
             for s in ("none", "zero1", "zero2", "zero3")}
    assert terms["none"].params + terms["none"].grads + terms["none"].optimizer == pytest.approx(16 * psi)
    z1, z2, z3 = terms["zero1"], terms["zero2"], terms["zero3"]
    assert z1.params + z1.grads + z1.optimizer == pytest.approx(4 * psi + 12 * psi / 8)
    assert z2.params + z2.grads + z2.optimizer == pytest.approx(2 * psi + 14 * psi / 8)
    assert z3.params + z3.grads + z3.optimizer == pytest.approx(16 * psi / 8)
    assert terms["none"].buffers == BUCKET_BYTES


def test_pipeline_first_stage_holds_pp_micro_batches():
    arch = models.get("gpt3-175b")
    lo = Layout(tp=8, pp=12, dp=4, mb=1, ac="selective")
    m = memory(arch, lo, global_batch=1536, seq=2048, gpus_per_node=8)
    per_layer = 34 * 2048 * 1 * 12288 / 8
    assert m.activations == pytest.approx(8 * per_layer * 12)  # 96/12 layers, 12 micro-batches in flight
    inter = memory(arch, Layout(tp=8, pp=12, dp=4, mb=1, ac="selective", vpp=2), global_batch=1536, seq=2048,
                   gpus_per_node=8)
    assert inter.activations == pytest.approx(m.activations * (1 + 11 / 24))


def test_hsdp_shards_inside_a_machine():
    arch = models.get("llama2-7b")
    m = memory(arch, Layout(dp=32, shard="hsdp", mb=1), global_batch=32, seq=4096, gpus_per_node=8)
    assert m.optimizer == pytest.approx(12 * arch.params() / 8)
