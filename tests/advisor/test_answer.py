"""What advise decides: the model, named strategies or a search, rows left out with reasons, assumptions."""

import pytest

from gpucomm.advisor import answer, hardware
from gpucomm.advisor.cli import AdviseConfig


def _cfg(**kw):
    cfg = AdviseConfig(hardware="h200-nvswitch", **kw)
    cfg.gpus = cfg.gpus or 8
    return cfg


def test_params_give_a_gpt3_family_shape():
    arch = answer.synthetic_gpt(175e9, 2048)  # GPT-3 175B itself: 96 layers of 12288
    assert (arch.layers, arch.hidden) == (96, 12288) and arch.params() == pytest.approx(175e9, rel=0.05)
    assert answer.synthetic_gpt(1e15, 2048).layers == 1720


def test_named_strategies_for_trains_models_and_a_search_otherwise():
    prof = hardware.get("h200-nvswitch")
    named = answer.advise(_cfg(model="gpt-124m", global_batch=64), prof)
    # zero2 and zero3 are priced the same as zero1 and fsdp here (one micro-batch; below ZeRO-3's live cap):
    # shown once, under the kept name, the other named in its note
    assert named.named and {named.names[id(p)] for p in named.plans} == {"dp", "replicated", "ddp", "zero1", "fsdp"}
    notes = {named.names[id(p)]: p.notes for p in named.plans}
    assert "priced the same as zero3 (shown once)" in notes["fsdp"]
    assert "priced the same as zero2 (shown once)" in notes["zero1"]
    searched = answer.advise(_cfg(model="llama3-8b", global_batch=16, top=3), prof)
    assert not searched.named and len(searched.plans) == 3


def test_rows_that_do_not_apply_are_left_out_with_their_reason():
    prof = hardware.get("h200-nvswitch")
    one = answer.advise(_cfg(model="gpt-124m", global_batch=16, gpus=1), prof)
    left = dict(one.left_out)
    assert "single" not in left and "shard over" in left["fsdp"]  # one GPU: nothing to shard over
    with pytest.raises(ValueError, match="--model 'nosuch'"):
        answer.architecture(_cfg(model="nosuch"))


def test_an_extrapolated_compute_lookup_is_said():
    from gpucomm import models
    from gpucomm.advisor import search, timing
    from gpucomm.advisor.compute import ComputeParts
    from gpucomm.advisor.job import Job
    from gpucomm.advisor.layout import Layout

    job = Job(arch=models.get("gpt-124m"), profile=hardware.get("h200-nvswitch"), nodes=1, gpus_per_node=1,
              global_batch=8, seq=1024)
    parts = ComputeParts(t_mb=0.02, t_head=0.004, gemm_fwd_s=0.0005, attn_fwd_s=0.0001, per_stage=12,
                         extrapolated=("tokens 262144 above the largest measured 131072",))
    plan = search.Plan(layout=Layout(mb=8), memory=None, time=timing.step_time(job, Layout(mb=8), parts),
                       capacity=None)
    assert any("extrapolated beyond the measured compute profile: tokens 262144" in a
               for a in answer.assumptions(job, [plan]))
