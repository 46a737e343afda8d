"""The datasheet compute source, by hand: what ``step_time`` assembles from it."""

import pytest

from gpucomm import models
from gpucomm.advisor import hardware, timing
from gpucomm.advisor.compute import datasheet, source_for
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout


def _job(hw="a100-nvlink3", model="gpt-350m", batch=8):
    return Job(arch=models.get(model), profile=hardware.get(hw), nodes=1, gpus_per_node=1, global_batch=batch,
               seq=1024)


def test_a_gpu_without_a_compute_profile_is_priced_by_the_datasheet_and_says_so():
    job = _job()
    src = source_for(job)
    assert src.measured is False and src.name == "datasheet"
    assert src.assumptions(job)[0].startswith("compute not measured")


def test_optimizer_is_adams_28_bytes_per_parameter_at_the_hbm_bandwidth():
    job = _job()
    got = datasheet.Datasheet().optimizer_s(job, 1e9)
    assert got.value == pytest.approx(28e9 / 2039e9) and got.extrapolated == ()


def test_one_gpu_step_is_micro_batches_of_parts_plus_the_optimizer():
    job = _job(batch=8)
    lay = Layout(mb=2)
    parts = datasheet.parts(job, lay)
    t = timing.step_time(job, lay)
    assert t.micro_batches == 4
    assert t.compute_s == pytest.approx(4 * parts.t_mb + datasheet.optimizer_s(job, job.arch.params()))
    # by hand: the head's matmuls (6 V h per token) at peak x efficiency x size factor, plus 16 B per logit
    p, arch, tokens = job.profile, job.arch, 2 * 1024
    eff = datasheet.GEMM_EFFICIENCY * datasheet.size_factor(arch.hidden, tokens)
    head = 6 * arch.vocab * arch.hidden * tokens / (312e12 * eff) + 16 * arch.vocab * tokens / (p.memory_bw_gbps * 1e9)
    assert parts.t_head == pytest.approx(head)
