import pytest
import torch

from gpucomm.train.config import TOLERANCES, ConfigError, TrainConfig


def _cfg(**kw):
    base = dict(model="gpt-tiny", steps=3, warmup_steps=1, global_batch=4, devices=["cpu", "cpu"])
    return TrainConfig(**{**base, **kw})


def test_single_first_and_deduplicated():
    cfg = _cfg(strategies=("replicated", "ddp", "replicated"))
    assert cfg.strategies == ("single", "replicated", "ddp")
    assert _cfg(strategies="ddp,single").strategies == ("single", "ddp")


def test_strategy_names_are_not_resolved_here():
    # the config does not import the registry (no config <-> strategies cycle); plan.resolve checks names
    assert _cfg(strategies=("single", "fsdp2")).strategies == ("single", "fsdp2")
    with pytest.raises(ConfigError, match="--strategies"):
        _cfg(strategies=())


def test_batch_must_divide_by_devices():
    with pytest.raises(ConfigError, match="--global-batch 5 does not divide by the 2 devices"):
        _cfg(global_batch=5)
    _cfg(global_batch=6)


@pytest.mark.parametrize("kw, match", [
    ({"steps": 0}, "--steps"),
    ({"warmup_steps": 3}, "leaves no timed step"),
    ({"global_batch": 0}, "--global-batch"),
    ({"lr": 0.0}, "--lr"),
    ({"nproc": 0}, "--nproc"),
    ({"nproc": 2.5}, "--nproc"),
    ({"precision": "fp8"}, "--precision"),
    ({"precision": "bf16"}, "only on CUDA"),
    ({"tolerance": -1.0}, "--tolerance"),
    ({"bucket_cap_mb": 0}, "bucket sizes"),
])
def test_bad_values(kw, match):
    with pytest.raises(ConfigError, match=match):
        _cfg(**kw)


def test_devices_parsed_and_of_one_type():
    cfg = _cfg()
    assert cfg.devices == [torch.device("cpu")] * 2 and cfg.device_type == "cpu"
    with pytest.raises(ValueError, match="--devices"):
        _cfg(devices=["cpu", "cuda:0"])


def test_devices_that_do_not_exist_are_refused(monkeypatch):
    from gpucomm.train import config as train_config

    monkeypatch.setattr(train_config, "cuda_device_count", lambda: 1)
    with pytest.raises(ConfigError, match=r"--devices: cuda:1 does not exist \(1 CUDA device\(s\) visible\)"):
        _cfg(devices=["cuda:0", "cuda:1"])


def test_precision_and_tolerance_on_cpu():
    cfg = _cfg()
    assert cfg.resolved_precision() == "fp32"
    assert TOLERANCES["fp32"] == 1e-5 and TOLERANCES["bf16-autocast"] > TOLERANCES["fp32"]


def test_model_defaults_to_gpt_tiny_without_a_gpu_and_says_so():
    cfg = TrainConfig(devices=["cpu", "cpu"])
    assert cfg.model == "gpt-tiny" and cfg.model_defaulted
    assert (cfg.steps, cfg.global_batch) == (20, 16)  # CPU: a short run; CUDA keeps 50 steps of 32
    assert not _cfg().model_defaulted


def test_nproc_beyond_the_machine_is_refused_unless_allowed(monkeypatch):
    from gpucomm.train import config

    monkeypatch.setattr(config, "process_limit", lambda: 8)
    with pytest.raises(ConfigError, match="--nproc 1000: this machine holds at most 8.*--allow-many-procs"):
        _cfg(nproc=1000)
    assert _cfg(nproc=1000, allow_many_procs=True, global_batch=1000).nproc == 1000


def test_process_limit_follows_cores():
    import os

    from gpucomm.train.config import process_limit

    assert 1 <= process_limit() <= 4 * (os.cpu_count() or 1)


def test_out_under_a_regular_file_is_refused_and_nothing_is_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        _cfg(out=blocker / "results")
    with pytest.raises(ConfigError, match="expected a directory, but it is a file"):
        _cfg(out=blocker)
    _cfg(out=tmp_path / "new" / "deeper")
    assert not (tmp_path / "new").exists()  # validated, not created


def test_graphs_need_cuda():
    with pytest.raises(ConfigError, match="--graphs"):
        _cfg(graphs=True)
