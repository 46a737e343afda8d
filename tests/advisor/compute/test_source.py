"""Which compute source prices a job: a user's profile, the shipped or derived one, else the datasheet."""

import pytest

from gpucomm import models
from gpucomm.advisor import hardware, timing
from gpucomm.advisor.compute import profile as prof
from gpucomm.advisor.compute import source
from gpucomm.advisor.compute.datasheet import Datasheet
from gpucomm.advisor.compute.profile import ProfileError, ProfileSource
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout

from ._profiles import synthetic


def _job(hw, **kw):
    return Job(arch=models.get("gpt-350m"), profile=hardware.get(hw), nodes=1, gpus_per_node=1, global_batch=4,
               seq=1024, **kw)


@pytest.fixture
def shipped_h200(monkeypatch):
    """Pretend the package ships a measured H200 profile (the lead commits the real one)."""
    p = synthetic()
    p.source = "shipped h200.json"
    monkeypatch.setattr(source, "shipped", lambda name: p if name == "h200.json" else None)
    source._shipped_source.cache_clear()
    source._derived.cache_clear()
    yield p
    source._shipped_source.cache_clear()
    source._derived.cache_clear()


def test_without_a_shipped_profile_every_gpu_is_the_datasheet():
    if source.shipped("h200.json") is not None:
        pytest.skip("a measured H200 profile ships with this tree")
    for hw in ("h200-nvswitch", "h100-nvswitch", "a100-nvlink3", "v100-nvlink2"):
        assert isinstance(source.source_for(_job(hw)), Datasheet), hw


def test_the_shipped_h200_profile_prices_h200_and_derives_h100_sxm(shipped_h200):
    h200 = source.source_for(_job("h200-nvswitch"))
    assert isinstance(h200, ProfileSource) and h200.measured and h200.profile is shipped_h200
    h100 = source.source_for(_job("h100-nvswitch"))
    assert isinstance(h100, ProfileSource) and h100.scale.memory == pytest.approx(4.8 / 3.35)
    for hw in ("a100-nvlink3", "v100-nvlink2", "h100-96gb-nvswitch", "pcie-gen5"):
        src = source.source_for(_job(hw))
        assert isinstance(src, Datasheet) and src.assumptions(_job(hw))[0].startswith("compute not measured"), hw
    assert isinstance(source.source_for(_job("h200-nvswitch", kernels="unfused")), Datasheet)


def test_step_time_reads_the_measured_source(shipped_h200):
    job = _job("h200-nvswitch")
    src = source.source_for(job)
    parts = src.parts(job, Layout(mb=4))
    t = timing.step_time(job, Layout(mb=4))
    assert t.compute_s == pytest.approx(parts.t_mb + src.optimizer_s(job, _local_params(job)).value)


def _local_params(job):
    from gpucomm.advisor.memory import stage_params

    return stage_params(job.arch, Layout(mb=4), 0)[0]


def test_a_users_profile_file_is_checked_against_the_hardware(tmp_path):
    path = tmp_path / "a100.json"
    prof.save(synthetic(gpu="NVIDIA A100-SXM4-80GB"), path)
    src = source.source_for(_job("a100-nvlink3", compute_profile=str(path)))
    assert isinstance(src, ProfileSource) and "A100" in src.name
    with pytest.raises(ProfileError, match="but --hardware h200-nvswitch is H200"):
        source.check(_job("h200-nvswitch", compute_profile=str(path)))
    with pytest.raises(ProfileError, match="--software compiled"):
        source.check(_job("a100-nvlink3", compute_profile=str(path), software="compiled"))


def _advise(argv, capsys):
    from gpucomm import cli

    rc = cli.main(["advise", "--gpus", "1", "--arch", "layers=4,hidden=2048,heads=16,ffn=6144,vocab=50304,seq=1024",
                   "--layout", "tp=1,pp=1,cp=1,dp=1,shard=none,mb=4,ac=none", "--global-batch", "4", "--json", *argv])
    return rc, capsys.readouterr()


def test_advise_prices_from_a_compute_profile_file_and_says_where_it_was_measured(tmp_path, capsys):
    import json

    path = tmp_path / "h200.json"
    prof.save(synthetic(), path)
    rc, got = _advise(["--hardware", "h200-nvswitch", "--compute-profile", str(path)], capsys)
    assert rc == 0, got.err
    data = json.loads(got.out)
    assert any(a.startswith("compute measured on NVIDIA H200 at 700 W") for a in data["assumptions"])
    assert any("reserved margin is measured" in a for a in data["assumptions"])
    row = data["advice"][0]
    assert row["memory_margin_bytes"] == pytest.approx(0.5 * 4 * 4096 * 50304, rel=1e-6)  # the synthetic margin


@pytest.mark.parametrize("extra, words", [
    (["--hardware", "a100-nvlink3"], "measured on 'NVIDIA H200', but --hardware a100-nvlink3 is A100"),
    (["--hardware", "h200-nvswitch", "--software", "compiled"], "--software compiled: the compute profile"),
    (["--hardware", "h200-nvswitch", "--software", "jit"], "--software 'jit': expected one of eager|compiled|fused"),
])
def test_advise_refuses_a_profile_it_cannot_use_in_one_line(tmp_path, capsys, extra, words):
    path = tmp_path / "h200.json"
    prof.save(synthetic(), path)
    rc, got = _advise(["--compute-profile", str(path), *extra], capsys)
    assert rc == 2 and got.out == ""
    err = got.err.strip()
    assert err.startswith("gpucomm advise: error: ") and words in err and "\n" not in err


def test_advise_refuses_a_corrupt_profile(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text('{"kind": "bench"}')
    rc, got = _advise(["--hardware", "h200-nvswitch", "--compute-profile", str(path)], capsys)
    assert rc == 2 and "not a compute profile" in got.err and got.out == ""
