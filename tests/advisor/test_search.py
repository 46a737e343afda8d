"""The planner's search: every candidate valid, fixed keys respected, ranking, speed of a large case."""

import pytest

from gpucomm import models
from gpucomm.advisor import hardware
from gpucomm.advisor.layout import Layout, LayoutError, check
from gpucomm.advisor.search import TIE_MARGIN, Job, candidates, evaluate, search, simplicity


def _job(model="llama3-8b", hw="h100-nvswitch", nodes=1, batch=16, seq=None):
    arch = models.get(model)
    return Job(arch=arch, profile=hardware.get(hw), nodes=nodes, gpus_per_node=8, global_batch=batch,
               seq=seq or arch.seq)


def test_every_candidate_passes_the_checks():
    job = _job(nodes=2, batch=32)
    cands = candidates(job, {})
    assert len(cands) > 100
    for lo in cands:
        check(lo, job.arch, gpus=16, gpus_per_node=8, global_batch=32, seq=job.seq, nodes=2)
    assert {lo.shard for lo in cands} == {"none", "zero1", "zero2", "zero3", "fsdp", "hsdp"}


def test_fixed_keys_are_respected():
    plans = search(_job(nodes=8, model="llama3-70b", hw="a100-nvlink3", batch=64), {"shard": "fsdp", "ac": "full"})
    assert all(p.layout.shard == "fsdp" and p.layout.ac == "full" for p in plans)


def test_recommendation_is_the_simplest_within_the_margin():
    plans = search(_job())
    best = plans[0]
    fastest = max(p.tokens_per_s_per_gpu for p in plans if p.fits)
    assert best.rank == 1 and best.fits
    assert best.tokens_per_s_per_gpu >= fastest * (1 - TIE_MARGIN)
    quickest = min(p.time.step_s for p in plans if p.fits)  # the margin is on step time, as rank() reads it
    close = [p for p in plans if p.fits and p.time.step_s <= quickest * (1 + TIE_MARGIN)]
    assert simplicity(best.layout) == min(simplicity(p.layout) for p in close)
    assert all(p.reason for p in plans)


def test_llama3_8b_on_8_h100_is_feasible():
    # issue 11, case 1: every strategy used to be flagged "does not fit"
    plans = search(_job())
    assert plans[0].fits and plans[0].memory.total <= hardware.get("h100-nvswitch").memory_bytes


def test_nothing_fits_flags_rows_with_the_largest_term():
    job = _job(model="llama3-405b", hw="a100-40gb-nvlink3", batch=8)
    plans = search(job)
    assert plans and all(not p.fits and p.rank is None and "does not fit" in p.reason for p in plans)


def test_full_layout_is_evaluated_exactly():
    plans = search(_job(), {"tp": 1, "pp": 1, "cp": 1, "dp": 8, "shard": "fsdp", "mb": 1, "ac": "full"})
    assert len(plans) == 1 and plans[0].layout.ac == "full"


def test_impossible_fixed_keys_name_the_rule():
    with pytest.raises(LayoutError, match="tp=3"):
        search(_job(), {"tp": 3})


def test_more_recomputation_is_slower_and_smaller():
    job = _job(model="llama3-70b", hw="a100-nvlink3", nodes=8, batch=64)
    sel = evaluate(job, _lo(ac="selective"))
    full = evaluate(job, _lo(ac="full"))
    assert full.time.step_s > sel.time.step_s and full.memory.activations < sel.memory.activations


def _lo(**kw):
    from gpucomm.advisor.layout import Layout

    return Layout(**{"dp": 64, "shard": "fsdp", "mb": 1, **kw})


def test_405b_on_4096_gpus_finds_a_fitting_layout():
    # its speed is measured by benchmarks/advisor_published.py (tests check behaviour, not timings)
    plans = search(_job(model="llama3-405b", nodes=512, batch=2048))
    assert plans[0].fits and plans[0].layout.gpus == 4096


@pytest.mark.parametrize("gpus, batch", [(16384, 2048), (1 << 20, 1 << 20), (8, 1 << 40)])
def test_the_search_is_bounded_at_any_scale(gpus, batch):
    # the work is the layouts visited: divisors of the GPU count, heads and batch, never every value
    job = _job(model="llama3-405b", nodes=gpus // 8, batch=batch)
    assert len(candidates(job, {})) <= 20_000


def test_a_pipeline_keeps_the_given_stages_and_virtual_stages():
    plans = search(_job(model="llama3-405b", nodes=512, batch=2048),
                   {"tp": 8, "pp": 16, "stages": (7,) + (8,) * 14 + (7,), "vpp": 8})
    assert plans and all(p.layout.stages[0] == 7 and p.layout.vpp == 8 for p in plans)
    assert plans[0].fits


def test_ranking_is_by_step_time_and_each_reason_states_its_own():
    plans = search(_job())
    ranked = [p for p in plans if p.rank is not None]
    assert [p.time.step_s for p in ranked[1:]] == sorted(p.time.step_s for p in ranked[1:])
    assert all(" per step" in p.reason for p in plans)


def test_layouts_priced_the_same_are_shown_once_under_the_fsdp_name():
    from gpucomm.advisor import hardware
    from gpucomm.advisor.job import Job
    from gpucomm.advisor.precision import Precision
    from gpucomm.advisor.search import distinct, evaluate

    arch = models.get("gpt-350m")
    job = Job(arch=arch, profile=hardware.get("h200-nvswitch"), nodes=1, gpus_per_node=8, global_batch=64,
              seq=1024, precision=Precision())
    z3, fs, ddp = (evaluate(job, Layout(dp=8, shard=s, mb=8)) for s in ("zero3", "fsdp", "none"))
    assert z3.time.step_s == fs.time.step_s and z3.memory.total == fs.memory.total  # below the live-param cap
    names = {id(z3): "zero3", id(fs): "fsdp", id(ddp): "ddp"}
    got = distinct([z3, ddp, fs], names)
    assert got == [fs, ddp] and names[id(fs)] == "fsdp"  # the FSDP name; its note names the other
    assert "priced the same as zero3 (shown once)" in fs.notes
    rows = search(job, {"tp": 1, "pp": 1, "cp": 1, "mb": 8, "ac": "none"}, top=20)
    priced = [(p.time.step_s, p.memory.total) for p in rows]
    assert len(priced) == len(set(priced)) and "zero3" not in {p.layout.shard for p in rows}


def test_a_host_paced_recommendation_says_it_waits_for_the_host():
    """gpt-1.3b-like layers under per-op checkpointing at one 4,096-token sample on the shipped H200 profile are
    paced by the host (its Python issues every op): the reason names the wait as the step's largest overhead,
    and full checkpointing, which the device paces, names none."""
    from gpucomm import cli

    def reason(ac: str) -> str:
        import contextlib
        import io
        import json

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(["advise", "--gpus", "1", "--hardware", "h200-nvswitch", "--arch",
                             "layers=24,hidden=2048,heads=16,kv_heads=16,ffn=8192,ffn_kind=gelu-4h,vocab=50304,seq=4096,tied=1",
                             "--layout", f"tp=1,pp=1,cp=1,dp=1,shard=none,mb=1,ac={ac}", "--global-batch", "1",
                             "--json"]) == 0
        return json.loads(out.getvalue())["advice"][0]["reason"]

    assert "largest overhead waiting for the host" in reason("op")
    assert "waiting for the host" not in reason("full")
