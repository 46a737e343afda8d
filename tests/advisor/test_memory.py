"""Memory terms against hand-computed values from the cited mechanisms (Korthikanti et al. 2022; ZeRO; PyTorch's
autocast, cross-entropy and DDP; Megatron-Core's pipeline schedules)."""

import pytest

from gpucomm import models
from gpucomm.advisor import hardware
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.memory import (
    ALLOCATOR_MARGIN_BYTES,
    BUCKET_BYTES,
    RUNTIME_BYTES,
    activation_bytes_per_layer,
    activation_terms,
    in_flight,
    memory,
    model_state_terms,
)
from gpucomm.advisor.precision import Precision

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


H200 = hardware.get("h200-nvswitch")
BF16_16BIT = Precision(compute="bf16", weights="bf16")  # ZeRO's 2 + 2 + 12


def job(arch, *, global_batch, seq, gpus=8, nodes=1, precision=BF16_16BIT, **kw):
    return Job(arch=models.get(arch) if isinstance(arch, str) else arch, profile=kw.pop("profile", H200),
               nodes=nodes, gpus_per_node=gpus, global_batch=global_batch, seq=seq, precision=precision, **kw)


def test_issue_case_8b_memory_terms():
    # issue 11 case 1: 8 GPUs, FSDP, micro-batch 2, torchtitan's op policy; FSDP2 mixed precision: no autocast
    arch = models.get("llama3-8b")
    m = memory(job(arch, global_batch=16, seq=8192, precision=Precision(), loss="upcast-del"),
               Layout(dp=8, shard="fsdp", mb=2, ac="op"))
    sbh = 8192 * 2 * 4096
    # the peak is the start of backward: 32 layers keep 15.53 s b h; the last stage also keeps the final norm's and
    # the head's inputs (2 + 2 s b h).  The layer recomputed later holds its working set, 41 s b h plus eager
    # Llama's 2 + 2 and 4 x (1 - 8/32) = 3, once the loss's 12 B per logit are freed: 48 s b h = 3.2 GB < 25 GB
    assert m.activations == pytest.approx(32 * (15.5 + 128 / 4096) * sbh + 4 * sbh)
    assert m.params + m.optimizer == pytest.approx(12 * arch.params() / 8)  # fp32 weights + Adam, sharded
    assert m.grads == 0  # one micro-batch: zero_grad(set_to_none) left none at the start of backward
    # the upcast loss in torchtitan's loop, which deletes its logits: 12 bytes per logit (log-softmax output, its
    # incoming and outgoing gradients, fp32)
    assert m.loss == 12 * 16384 * 128256
    assert m.autocast == 0  # FSDP gathers 16-bit weights itself


def test_fsdp_terms_for_llama3_70b_on_64_gpus():
    arch = models.get("llama3-70b")
    lo = Layout(dp=64, shard="fsdp", mb=1, ac="full")
    m = memory(job(arch, global_batch=64, seq=8192, gpus=8, nodes=8, loss="fused"), lo)
    psi = arch.params()
    assert m.params == pytest.approx(2 * psi / 64)
    assert m.grads == pytest.approx(2 * psi / 64)  # 16-bit-weight stacks keep gradient buffers
    assert m.optimizer == pytest.approx(12 * psi / 64)
    # full recompute, at the start of backward: every layer's input + final norm and head inputs, and the fused
    # loss's 16-bit logits and their gradient (4 B per logit: 4.2 GB).  The layer recomputed after the loss's
    # tensors are freed holds its working set — for Llama-3-70B (kv = h/8, f = 3.5 h, SwiGLU, no dropout)
    # 4 norms + 2 QKV in + 2 Q + 0.25 K + 0.25 V + 2 attention out + 2 MLP in + 4 x 7 SwiGLU tensors = 40.5 s b h,
    # + eager Llama's 2 + 2 and 4 x (1 - 8/64): 48 s b h = 3.2 GB — less than the loss's
    assert m.activations == pytest.approx(80 * 2 * 8192 * 8192 + 4 * 8192 * 8192)
    assert m.loss == pytest.approx(4 * 8192 * arch.vocab)
    assert m.buffers == pytest.approx(6 * arch.layer_params())  # 2 gathered layers (bf16) + 1 layer of grads
    assert m.margin == ALLOCATOR_MARGIN_BYTES and m.runtime == RUNTIME_BYTES
    assert m.allocated == pytest.approx(sum(v for k, v in m.as_dict().items() if k not in ("margin", "runtime")))
    assert m.reserved == m.allocated + m.margin and m.total == m.reserved + m.runtime


def test_zero_stages_shard_what_the_paper_says_at_the_optimizer_step():
    arch = models.Architecture(name="big", layers=4, hidden=4096, heads=32, kv_heads=32, ffn_hidden=16384,
                               ffn_kind="gelu-4h", vocab=32000, seq=128, tied_embeddings=True)
    psi = arch.params()  # tiny activations: the optimizer step is the peak
    terms = {s: memory(job(arch, global_batch=8, seq=128), Layout(dp=8, shard=s, mb=1))
             for s in ("none", "zero1", "zero2", "zero3")}
    none, z1, z2, z3 = terms.values()
    assert none.params + none.grads + none.optimizer == pytest.approx(16 * psi)
    assert z1.params + z1.grads + z1.optimizer == pytest.approx(4 * psi + 12 * psi / 8)
    assert z2.params + z2.grads + z2.optimizer == pytest.approx(2 * psi + 14 * psi / 8)
    assert z3.params + z3.grads + z3.optimizer == pytest.approx(16 * psi / 8)
    assert z1.buffers == BUCKET_BYTES
    assert none.buffers == 0  # 16-bit-weight stacks keep gradients in persistent buffers: no bucket copy


def test_pipeline_stages_hold_what_megatrons_schedules_hold():
    arch = models.get("gpt3-175b")
    lo = Layout(tp=8, pp=12, dp=4, mb=1, ac="selective")
    m = memory(job(arch, global_batch=1536, seq=2048, gpus=8, nodes=48), lo)
    per_layer = 34 * 2048 * 1 * 12288 / 8
    assert m.stage == 0 and m.activations == pytest.approx(8 * per_layer * 12)  # 96/12 layers, 12 in flight
    inter = memory(job(arch, global_batch=1536, seq=2048, gpus=8, nodes=48), Layout(tp=8, pp=12, dp=4, mb=1,
                                                                                     ac="selective", vpp=2))
    assert inter.activations == pytest.approx(m.activations * (1 + 11 / 24))  # Narayanan et al.'s factor
    # warm-up forwards (pp - r - 1), interleaved 2 (pp - r - 1) + (vpp - 1) pp chunks, +1 in flight
    assert in_flight(Layout(pp=4), 3, 10, 64) == 10 * 1
    assert in_flight(Layout(pp=4, vpp=2), 1, 10, 64) == (2 * 2 + 4 + 1) * 10 / 2
    assert in_flight(Layout(pp=4, vpp=2), 0, 10, 2) == 4 * 10 / 2  # m * vpp chunks at most


def test_uneven_stages_move_the_peak_to_the_stage_that_holds_most():
    arch = models.get("llama3-8b")
    j = job(arch, global_batch=64, seq=8192, gpus=8, loss="fused")
    even = memory(j, Layout(pp=4, dp=2, mb=1))
    # fewer layers on the first stage: its 4 micro-batches of 6 layers no longer outweigh stage 1's 3 x 10
    light = memory(j, Layout(pp=4, dp=2, mb=1, stages=(6, 10, 10, 6)))
    sbh = 8192 * 4096
    assert even.stage == 0 and even.activations == pytest.approx(4 * 8 * (41 + 4 + 3) * sbh)
    assert light.stage == 1 and light.activations == pytest.approx(3 * 10 * (41 + 4 + 3) * sbh)


def test_hsdp_shards_inside_a_machine():
    arch = models.get("llama2-7b")
    m = memory(job(arch, global_batch=32, seq=4096, gpus=8, nodes=4), Layout(dp=32, shard="hsdp", mb=1))
    assert m.optimizer == pytest.approx(12 * arch.params() / 8)


def test_recomputed_layer_holds_its_scores_without_flash():
    # a vocabulary small enough that the recomputed layer, not the loss, sets the peak
    arch = models.Architecture(name="gpt", layers=40, hidden=1536, heads=16, kv_heads=16, ffn_hidden=6144,
                               ffn_kind="gelu-4h", vocab=512, seq=1024, tied_embeddings=True, biases=True,
                               dropout=True)
    flash = memory(job(arch, global_batch=8, seq=1024, gpus=1), Layout(mb=8, ac="full"))
    plain = memory(job(arch, global_batch=8, seq=1024, gpus=1, kernels="unfused"), Layout(mb=8, ac="full"))
    # Korthikanti's 5 a s^2 b bytes (softmax output 2, dropout mask 1, dropout output 2) for the one layer
    assert plain.activations - flash.activations == 5 * 16 * 1024**2 * 8


def test_gpt124m_single_step_by_hand_under_autocast():
    """``gpucomm train --model gpt-124m --global-batch 16`` on one H200 (bf16 autocast over fp32 weights, fused
    AdamW, no dropout, upcast loss): the peak is the start of backward."""
    arch = models.get("gpt-124m")
    m = memory(job(arch, global_batch=16, seq=1024, gpus=1, precision=Precision(), loss="upcast-del"),
               Layout(mb=16))  # gpucomm train's model returns the loss: its loop holds no logits
    psi, sbh, logits = arch.params(), 1024 * 16 * 768, 1024 * 16 * 50304
    # per layer: fp32 norm inputs 4 + 4, QKV input 2, Q K V 6, attention output 2, MLP input 2, GeLU in/out 8 + 8
    assert m.activations == pytest.approx(12 * 36 * sbh + (4 + 2) * sbh)
    assert m.params == 4 * psi and m.optimizer == 8 * psi and m.grads == 0
    assert m.autocast == 2 * arch.matmul_params()  # each matmul's bf16 weight copy, saved for backward
    assert m.loss == 12 * logits  # the loss's fp32 tensors
    # 16.0 GiB by hand; the H200 run measured 16.05 GiB allocated (train-host-r2_h200x1_2026-12-03, single)
    assert m.allocated / 2**30 == pytest.approx(16.05, rel=0.02)


def test_ddp_buckets_copy_the_gradients_and_replicated_keeps_views():
    arch = models.get("gpt-124m")
    j = job(arch, global_batch=16, seq=1024, gpus=1, precision=Precision())
    single = memory(j, Layout(mb=16))
    ddp = memory(j, Layout(mb=16, wrapper="ddp"))
    assert ddp.buffers == 4 * arch.params() and ddp.allocated - single.allocated == 4 * arch.params()
    rep = memory(job(arch, global_batch=16, seq=1024, gpus=2, precision=Precision()),
                 Layout(dp=2, mb=8, wrapper="replicated"))
    assert rep.buffers == 0 and rep.grads == 4 * arch.params()  # bucket views: persistent gradients


def test_colocated_replicas_add_up_and_dataparallel_shares_device_zero():
    arch = models.get("gpt-124m")
    kw = dict(global_batch=16, seq=1024, gpus=2, precision=Precision(), colocated=2)
    one = memory(job(arch, global_batch=8, seq=1024, gpus=1, precision=Precision()), Layout(mb=8, wrapper="replicated"))
    rep = memory(job(arch, **kw), Layout(dp=2, mb=8, wrapper="replicated"))
    assert rep.allocated == pytest.approx(2 * one.allocated)
    dp = memory(job(arch, **kw), Layout(dp=2, mb=8, wrapper="dataparallel"))
    psi = arch.params()
    # device 0: weights + its replica's copy, one optimizer, both replicas' activations and casts, and the loss
    # over the whole gathered batch of 16
    assert dp.params == 2 * 4 * psi and dp.optimizer == 8 * psi
    assert dp.loss == 14 * 16 * 1024 * 50304
    assert dp.activations == pytest.approx(2 * one.activations)


def test_cpu_profile_has_no_runtime_or_margin():
    arch = models.get("gpt-tiny")
    prof = hardware.HardwareProfile(name="cpu", kind="cpu-gloo", description="", peak_tflops={}, memory_bytes=None,
                                    memory_bw_gbps=None, max_gpus_per_node=2, intra=hardware.NVSWITCH_H, inter=None)
    m = memory(job(arch, global_batch=32, seq=32, gpus=1, precision=Precision(compute="fp32"), profile=prof),
               Layout(mb=32))
    assert m.margin == 0 and m.runtime == 0 and m.autocast == 0


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


def test_the_loss_counts_the_logits_the_loop_holds_per_implementation():
    """Hand values per logit with 16-bit compute (module docstring, **Loss**): upcast 12 B of fp32 tensors + the
    2 B logits the loop holds = 14; autocast's log_softmax(dtype=float32) writes its input's gradient in 16 bits,
    10 + 2 = 12 (the H200 allocator showed it: memory-peak-r3_h200x1_2026-12-04.txt); torchtitan's loop deletes
    the logits (12); fused 4."""
    from gpucomm.advisor.memory import loss_bytes_per_logit

    assert [loss_bytes_per_logit(k, 2) for k in ("upcast", "autocast", "upcast-del", "fused")] == [14, 12, 12, 4]
    arch = models.get("gpt-124m")
    for loss, per in (("upcast", 14), ("autocast", 12), ("upcast-del", 12), ("fused", 4)):
        m = memory(job(arch, global_batch=4, seq=1024, precision=Precision(), loss=loss), Layout(mb=4))
        assert m.loss == per * 4 * 1024 * arch.vocab, loss


def test_eager_llama_saves_its_norm_outputs_and_repeated_kv():
    """Llama-3-8B (kv = h / 4) under autocast over fp32 weights, ac=none: eager adds RMSNorm's two outputs before
    the weight at the fp32 residual's 4 B (8), K, V repeated to every head 4 x (1 - 1/4) = 3, and the norm
    outputs cast to bf16 again for ``wk``, ``wv`` and ``w3`` (autocast's cache holds weights, not activations:
    each linear casts its input itself) 3 x 2 = 6: 17 s b h per layer beyond the fused stack's.  Measured on the
    H200 (benchmarks/results/memory-peak_h200x1_2026-12-04.txt, llama-160m): the norm output's bf16 cast live
    once at each of ``wq``, ``wk`` and ``wv``'s lines, 0.331-0.346 GiB over 12 layers of 16,384 x 896 tokens."""
    arch = models.get("llama3-8b")
    sbh = 4096 * 1 * 4096
    eager = memory(job(arch, global_batch=1, seq=4096, precision=Precision()), Layout(mb=1))
    fused = memory(job(arch, global_batch=1, seq=4096, precision=Precision(), software="fused"), Layout(mb=1))
    assert eager.activations - fused.activations == pytest.approx(32 * 17 * sbh)


def _gpt(layers: int, hidden: int, heads: int, seq: int) -> models.Architecture:
    return models.Architecture(name="gpt", layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
                               ffn_hidden=4 * hidden, ffn_kind="gelu-4h", vocab=50304, seq=seq,
                               tied_embeddings=True, biases=True, dropout=False)


def test_full_checkpointing_peaks_at_the_loss_forward_with_every_cast_weight():
    """benchmarks/advisor_single_gpu.py's gpt-1.5b (48 x 1600, 4 x 2048 tokens, full checkpointing, upcast loss,
    bf16 autocast over fp32 weights): the allocated peak is inside the loss's forward, where autocast's cast cache
    still holds every matmul weight's bf16 copy (the forward has not left ``torch.autocast``) beside the layers'
    fp32 inputs, the bf16 logits, and ``log_softmax``'s fp32 input and output — what the H200's allocator history
    showed live there (benchmarks/results/memory-peak_h200x1_2026-12-04.txt: 26.965 GiB)."""
    arch = _gpt(48, 1600, 25, 2048)
    m = memory(job(arch, global_batch=4, seq=2048, gpus=1, precision=Precision(), loss="upcast"),
               Layout(mb=4, ac="full"))
    sbh, logits = 2048 * 4 * 1600, 8192 * 50304
    assert m.activations == pytest.approx(48 * 4 * sbh + (4 + 2) * sbh)  # fp32 layer inputs; norm, head inputs
    assert m.autocast == 2 * arch.matmul_params()  # every layer's copy and the (tied) head's
    assert m.loss == 10 * logits  # bf16 logits 2, fp32 copy 4, log-softmax output 4
    assert m.grads == 0 and m.params == 4 * arch.params() and m.optimizer == 8 * arch.params()
    assert m.allocated / 2**30 == pytest.approx(26.965, rel=0.02)


def test_full_checkpointing_peaks_at_the_start_of_backward_without_the_recomputed_layer():
    """gpt-650m-mb8 (24 x 1408, 8 x 1024 tokens, full, upcast): a smaller model, the same logits — the peak is the
    start of backward: the loss's 12 B per logit and the logits the loop holds, only the head's bf16 copy (the cast
    cache is gone, the layers' copies are recomputed), and no layer's working set yet (it is recomputed after the
    loss's tensors are freed).  The H200 showed 13.859 GiB (memory-peak_h200x1_2026-12-04.txt)."""
    arch = _gpt(24, 1408, 11, 1024)
    m = memory(job(arch, global_batch=8, seq=1024, gpus=1, precision=Precision(), loss="upcast"),
               Layout(mb=8, ac="full"))
    sbh, logits = 1024 * 8 * 1408, 8192 * 50304
    assert m.activations == pytest.approx(24 * 4 * sbh + (4 + 2) * sbh)
    assert m.autocast == 2 * 50304 * 1408
    assert m.loss == 14 * logits
    assert m.allocated / 2**30 == pytest.approx(13.859, rel=0.02)


def test_loss_bytes_per_logit_by_moment():
    from gpucomm.advisor.memory import loss_bytes_per_logit

    assert [loss_bytes_per_logit(k, 2, "forward") for k in ("upcast", "autocast", "upcast-del", "fused")] == [
        10, 6, 10, 2]
    assert [loss_bytes_per_logit(k, 2, "recompute") for k in ("upcast", "autocast", "upcast-del", "fused")] == [
        2, 2, 0, 0]
