"""The job: software keys checked, GPU count."""

import pytest

from gpucomm import models
from gpucomm.advisor import hardware
from gpucomm.advisor.job import Job


def _job(**kw):
    return Job(arch=models.get("gpt-124m"), profile=hardware.get("h200-nvswitch"), nodes=2, gpus_per_node=8,
               global_batch=16, seq=1024, **kw)


def test_defaults_and_gpus():
    j = _job()
    assert j.gpus == 16 and j.loss == "upcast" and j.kernels == "fused" and j.dtype == "bf16"


@pytest.mark.parametrize("kw, word", [({"loss": "chunky"}, "--loss"), ({"kernels": "cuda"}, "--kernels"),
                                      ({"host": "laptop"}, "--host 'laptop'")])
def test_bad_software_keys(kw, word):
    with pytest.raises(ValueError, match=word):
        _job(**kw)
