"""Compute from measured whole steps: where it applies, and the step it gives back."""

import dataclasses

import pytest

from gpucomm import models
from gpucomm.advisor import hardware, measured
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout


def _job(points, c0=0.0, seq=1024, batch=16):
    prof = dataclasses.replace(hardware.get("h200-nvswitch"), calibration={"compute": {"models": {
        "gpt-124m": {"points": points, "c0_s": c0, "seq_len": 1024}}}})
    return Job(arch=models.get("gpt-124m"), profile=prof, nodes=1, gpus_per_node=1, global_batch=batch, seq=seq)


def test_parts_split_the_measured_step_into_fixed_and_per_micro_batch():
    job = _job([[8, 0.030], [16, 0.050]], c0=0.010)
    p = measured.parts(job, Layout(mb=16))
    assert p.fixed_s == 0.010 and p.t_mb == pytest.approx(0.040)
    arch = job.arch
    assert p.t_head == pytest.approx(0.040 * 6 * arch.vocab * arch.hidden / arch.flops_per_token(1024))
    assert measured.parts(job, Layout(mb=16, ac="full")).t_mb > p.t_mb  # the layers' forward again


def test_where_measurements_do_not_apply():
    job = _job([[8, 0.030]])
    assert measured.parts(job, Layout(tp=2, mb=8)) is None
    assert measured.parts(job, Layout(mb=8, ac="op")) is None
    assert measured.parts(_job([[8, 0.030]], seq=512), Layout(mb=8)) is None  # another sequence length
    assert measured.model_fit(Job(arch=models.get("llama3-8b"), profile=job.profile, nodes=1, gpus_per_node=1,
                                  global_batch=8, seq=8192)) is None
