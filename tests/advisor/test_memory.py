"""Memory terms against hand-computed values from the cited formulas (Korthikanti et al. 2022; ZeRO)."""

import pytest

from gpucomm import models
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.memory import (
    BUCKET_BYTES,
    RESERVE_BYTES,
    activation_bytes_per_layer,
    activation_terms,
    memory,
    model_state_terms,
)

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


def test_gpt_terms_sum_to_korthikantis_34_with_the_same_split():
    # Korthikanti et al. 2022 Sec. 4.1: attention 11 s b h (without scores), MLP 19 s b h, norms 4 s b h
    t = activation_terms(models.get("gpt3-175b"), "none")
    assert sum(t.values()) == 34
    assert t["norm inputs"] == 4
    assert t["QKV input"] + t["Q"] + t["K"] + t["V"] + t["attention output"] + t["dropout masks"] / 2 == 11
    assert t["MLP input"] + t["GeLU input"] + t["GeLU output"] + t["dropout masks"] / 2 == 19
    arch = models.get("gpt3-175b")
    assert activation_bytes_per_layer(S, B, H, A, 8, "selective", arch=arch) == S * B * H * 34 / 8
    # without flash attention the score terms come back: 2 (softmax) + 1 (mask) + 2 (dropout output) a s / h
    assert activation_bytes_per_layer(S, B, H, A, 1, "none", flash=False, arch=arch) == pytest.approx(
        S * B * H * (34 + 5 * A * S / H))


def test_llama3_8b_terms_by_hand():
    # h 4096, kv 1024 (8 of 32 heads), f 14336 = 3.5 h, SwiGLU, RMSNorm, no dropout, flash attention:
    # norms 2+2, QKV input 2, Q 2, K 0.5, V 0.5, attention output 2, MLP input 2, gate/SiLU/up/product 4 x 7
    arch = models.get("llama3-8b")
    assert sum(activation_terms(arch, "none").values()) == 41
    assert activation_bytes_per_layer(8192, 2, 0, 0, 1, "none", arch=arch) == 41 * 8192 * 2 * 4096
    # torchtitan's op policy keeps the block input, mm outputs 1, 3, 5, 7 (wq h, wv kv, w1 f, w2 h), the
    # SDPA output and its fp32 logsumexp (4 bytes x 32 heads per token)
    op = activation_terms(arch, "op")
    assert op == {"block input": 2, "wq output (kept mm)": 2, "wv output (kept mm)": 0.5,
                  "w1 output (kept mm)": 7, "w2 output (kept mm)": 2, "attention output (kept SDPA)": 2,
                  "attention logsumexp (fp32)": 4 * 32 / 4096}
    assert activation_bytes_per_layer(8192, 2, 0, 0, 4, "op", arch=arch) == pytest.approx(
        (15.5 + 128 / 4096) * 8192 * 2 * 4096 / 4)
    with pytest.raises(ValueError, match="arch"):
        activation_bytes_per_layer(8192, 2, 4096, 32, 1, "op")


def test_issue_case_8b_memory_terms():
    # issue 11 case 1: 8 GPUs, FSDP, micro-batch 2, torchtitan's op policy
    arch = models.get("llama3-8b")
    m = memory(arch, Layout(dp=8, shard="fsdp", mb=2, ac="op"), global_batch=16, seq=8192, gpus_per_node=8)
    sbh = 8192 * 2 * 4096
    # 32 layers keep 15.53 s b h; the layer being recomputed holds its 41 s b h working set
    assert m.activations == pytest.approx(32 * (15.5 + 128 / 4096) * sbh + 41 * sbh)
    assert m.params + m.grads + m.optimizer == pytest.approx(16 * arch.params() / 8)


def test_fsdp_terms_for_llama3_70b_on_64_gpus():
    arch = models.get("llama3-70b")
    lo = Layout(dp=64, shard="fsdp", mb=1, ac="full")
    m = memory(arch, lo, global_batch=64, seq=8192, gpus_per_node=8)
    psi = arch.params()
    assert m.params == pytest.approx(2 * psi / 64)
    assert m.grads == pytest.approx(2 * psi / 64)
    assert m.optimizer == pytest.approx(12 * psi / 64)
    # full recompute: every layer's input, plus one layer's working set while it is recomputed; for Llama-3-70B
    # (kv = h/8, f = 3.5 h, SwiGLU, no dropout) that set is 4 norms + 2 QKV in + 2 Q + 0.25 K + 0.25 V
    # + 2 attention out + 2 MLP in + 4 x 7 SwiGLU tensors = 40.5 s b h bytes
    assert m.activations == pytest.approx(80 * 2 * 8192 * 8192 + 40.5 * 8192 * 8192)
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


def test_recomputed_layer_holds_its_scores_without_flash():
    arch = models.Architecture(name="gpt", layers=40, hidden=1536, heads=16, kv_heads=16, ffn_hidden=6144,
                               ffn_kind="gelu-4h", vocab=51200, seq=1024, tied_embeddings=True, biases=True)
    kw = dict(global_batch=8, seq=1024, gpus_per_node=1)
    flash = memory(arch, Layout(mb=8, ac="full"), **kw)
    plain = memory(arch, Layout(mb=8, ac="full"), flash=False, **kw)
    # Korthikanti's 5 a s^2 b bytes (softmax output 2, dropout mask 1, dropout output 2) for the one layer
    assert plain.activations - flash.activations == 5 * 16 * 1024**2 * 8


def test_model_state_terms_match_the_zero_paper_table():
    # ZeRO paper: Psi = 7.5B, N_d = 64, mixed-precision Adam: 120 / 31.4 / 16.6 / 1.9 GB.
    got = [sum(model_state_terms(s, 7.5e9, 64, weight_bytes=2, grad_bytes=2, optimizer_bytes=12)) / 1e9
           for s in range(4)]
    assert got == pytest.approx([120.0, 31.40625, 16.640625, 1.875])


def test_model_state_terms_fp32_adam_by_term():
    assert model_state_terms(0, 1000, 4, weight_bytes=4, grad_bytes=4, optimizer_bytes=8) == (4000, 4000, 8000)
    assert model_state_terms(1, 1000, 4, weight_bytes=4, grad_bytes=4, optimizer_bytes=8) == (4000, 4000, 2000)
    assert model_state_terms(2, 1000, 4, weight_bytes=4, grad_bytes=4, optimizer_bytes=8) == (4000, 1000, 2000)


def test_model_state_terms_bad_stage_or_count():
    with pytest.raises(ValueError, match="stage"):
        model_state_terms(4, 1, 1, weight_bytes=4, grad_bytes=4, optimizer_bytes=8)
    with pytest.raises(ValueError, match="n: expected"):
        model_state_terms(0, 1, 0, weight_bytes=4, grad_bytes=4, optimizer_bytes=8)
