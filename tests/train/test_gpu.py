"""All strategies on GPUs: one GPU via a repeated cuda:0 (code paths), two GPUs for real NCCL.

Skipped without CUDA.  bf16 autocast comparisons use the bf16 tolerance (TOLERANCES["bf16-autocast"]);
fp32 ones the strict 1e-5.
"""


from gpucomm.cli import main
from gpucomm.records import load
from gpucomm.testing.markers import requires_gpus
from gpucomm.train.compare import run_comparison
from gpucomm.train.config import TOLERANCES, TrainConfig

ALL = ("single", "dp", "replicated", "ddp")


def _check(cmp, precision: str, n_devices: dict[str, int]) -> None:
    rows = {r.strategy: r for r in cmp.records}
    assert list(rows) == list(ALL)
    for name, r in rows.items():
        assert r.status == "ok", (name, r.note)
        assert r.precision == precision and r.device_type == "cuda"
        assert r.n_devices == n_devices[name]
        assert len(r.peak_mem_bytes) == r.n_devices and min(r.peak_mem_bytes) > 0
        assert r.gpu_ms_median > 0 and r.host_ms_median > 0 and r.host_breakdown_ms
        per_process = 1 if name == "ddp" else r.n_devices  # the devices one process drives
        assert abs(r.host_ms_per_device - r.host_ms_median / per_process) < 1e-9
        assert "may include waits" not in r.note  # host time from the idle-device warmup steps
        if name != "single":
            assert r.tolerance == TOLERANCES[precision]
            assert r.equal_to_single, (name, r.max_loss_rel_diff, r.max_param_rel_diff)
    assert rows["replicated"].comm_ms_median is not None and rows["replicated"].comm_ms_median > 0


def _cfg(devices, **kw) -> TrainConfig:
    base = dict(strategies=ALL, model="gpt-tiny", steps=6, warmup_steps=3, global_batch=8, devices=devices)
    return TrainConfig(**{**base, **kw})


@requires_gpus(1)
def test_all_strategies_on_one_gpu_bf16():
    cmp = run_comparison(_cfg(["cuda:0", "cuda:0"]))
    _check(cmp, "bf16-autocast", {"single": 1, "dp": 2, "replicated": 2, "ddp": 1})
    assert "not meaningful" in {r.strategy: r for r in cmp.records}["replicated"].note


@requires_gpus(1)
def test_all_strategies_on_one_gpu_fp32_strict():
    cmp = run_comparison(_cfg(["cuda:0", "cuda:0"], precision="fp32", model="mlp"))
    _check(cmp, "fp32", {"single": 1, "dp": 2, "replicated": 2, "ddp": 1})


@requires_gpus(2)
def test_all_strategies_on_two_gpus_bf16():
    cmp = run_comparison(_cfg(["cuda:0", "cuda:1"], model="gpt-tiny", seq_len=64))
    _check(cmp, "bf16-autocast", {"single": 1, "dp": 2, "replicated": 2, "ddp": 2})
    assert cmp.runs["ddp"].devices == ["cuda:0", "cuda:1"]


@requires_gpus(1)
def test_cli_on_a_repeated_gpu(tmp_path, capsys):
    rc = main(["train", "--model", "gpt-tiny", "--devices", "cuda:0,cuda:0", "--steps", "4", "--warmup-steps",
               "1", "--global-batch", "8", "--strategies", "dp,replicated", "--assert-equal", "--no-report",
               "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "speed is not meaningful" in out
    assert [r.strategy for r in load(tmp_path).train] == ["single", "dp", "replicated"]
