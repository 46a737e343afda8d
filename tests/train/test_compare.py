"""single and ddp (gloo, 2 processes) train identically; the checks can fail; rows carry host cost.

``replicated``'s own equality tests are in tests/train/strategies/test_replicated.py; the in-process
comparison machinery is tested here with ``TwinStrategy`` (tests/train/twin_strategy.py).
"""

import sys
from pathlib import Path

import pytest
import torch

from gpucomm.dist import launch
from gpucomm.train.compare import compare_runs, run_comparison
from gpucomm.train.config import TrainConfig
from gpucomm.train.launching import state_from_bytes
from gpucomm.train.loop import RunResult, run_strategy
from gpucomm.train.models import load_workload
from gpucomm.train.strategies import DDPStrategy, SingleStrategy, names, register

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from twin_strategy import TwinStrategy, UnaveragedTwin, UnreducedTwin  # noqa: E402

sys.path.remove(str(HERE))
FACTORY = "gpucomm_train_factory_example:factory"
MODELS = ("gpt-tiny", "mlp", FACTORY)


def _cfg(model: str, **kw) -> TrainConfig:
    base = dict(model=model, steps=4, warmup_steps=1, global_batch=8, devices=["cpu", "cpu"], lr=1e-3)
    return TrainConfig(**{**base, **kw})


def _local(cls, cfg: TrainConfig, **kw) -> RunResult:
    workload = load_workload(cfg.model, seed=cfg.seed, seq_len=cfg.seq_len)
    devices = cfg.devices[:1] if cls is SingleStrategy else cfg.devices
    return run_strategy(cls(cfg, devices, **kw), workload, cfg)


def _ranks(configs, launched):
    """In each launched rank: every config's ddp run, then run_launched (the torchrun path) for one."""
    from gpucomm.train.compare import run_launched
    from gpucomm.train.launching import rank_worker

    runs = [rank_worker("ddp", c) for c in configs]
    cmp = run_launched(launched)
    register(_NewPerProcess)  # registered in the ranks only: the parent's registry stays as shipped
    new = rank_worker(_NewPerProcess.name, launched)
    return runs, (None if cmp is None else cmp.records), new


class _NewPerProcess(DDPStrategy):
    """A strategy added later (as FSDP would be): a new name, launched by the unchanged machinery."""

    name = "ddp-added-later"


@pytest.fixture(scope="module")
def runs():
    """Every model under single, twin and ddp; all ddp runs share one 2-process launch."""
    sys.path.insert(0, str(HERE))  # the factory module, for this process and the spawned ranks
    try:
        configs = [_cfg(m) for m in MODELS]
        per_rank = launch(_ranks, 2, configs, _cfg("mlp"), backend="gloo")
        ddp = per_rank[0][0]
        for r in (*ddp, per_rank[0][2]):
            r.state = state_from_bytes(r.state)
        out = {"launched": [records for _, records, _ in per_rank], "added": per_rank[0][2]}
        for cfg, d in zip(configs, ddp, strict=True):
            out[cfg.model] = {"single": _local(SingleStrategy, cfg), "ddp": d,
                              "twin": _local(TwinStrategy, cfg)}
        yield out
    finally:
        sys.path.remove(str(HERE))


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("strategy", ["twin", "ddp"])
def test_equal_to_single_within_fp32_tolerance(runs, model, strategy):
    single, other = runs[model]["single"], runs[model][strategy]
    eq = compare_runs(other, single, 1e-5)
    assert eq.equal, eq
    assert len(other.losses) == 4 and other.losses != [single.losses[0]] * 4  # it trained
    changed = sum(float((single.state[k] - load_workload(model).build_model().state_dict()[k]).abs().sum())
                  for k in single.state)
    assert changed > 0  # parameters moved, so equality of parameters means something


def test_under_a_launcher_only_rank0_reports_ddp(runs):
    rank0, rank1 = runs["launched"]
    assert rank1 is None
    (row,) = rank0
    assert row.strategy == "ddp" and row.world_size == 2 and row.status == "ok"
    assert row.equal_to_single is None and row.scaling_efficiency is None and len(row.losses) == 4
    assert row.losses == pytest.approx(runs["mlp"]["ddp"].losses, rel=0, abs=0)  # same run, same numbers


def test_a_strategy_registered_later_runs_through_the_same_launcher(runs):
    added = runs["added"]
    assert added.strategy == "ddp-added-later" and added.world_size == 2
    assert compare_runs(added, runs["mlp"]["single"], 1e-5).equal
    assert "ddp-added-later" not in names()


def test_ddp_result_describes_its_ranks(runs):
    d = runs["gpt-tiny"]["ddp"]
    assert d.world_size == 2 and d.devices == ["cpu", "cpu"] and d.strategy == "ddp"
    assert d.params == runs["gpt-tiny"]["single"].params


@pytest.fixture
def twins(monkeypatch):
    from gpucomm.train import strategies

    for cls in (TwinStrategy, UnreducedTwin, UnaveragedTwin):
        monkeypatch.setitem(strategies.STRATEGIES, cls.name, cls)


def test_checks_catch_a_missing_reduction(runs):
    cfg = _cfg("gpt-tiny")
    broken = _local(UnreducedTwin, cfg)
    assert broken.problems and "differs" in broken.problems[0]
    assert not compare_runs(broken, runs["gpt-tiny"]["single"], 1e-5).equal


def test_checks_catch_a_wrong_averaging_factor_with_sgd():
    cfg = _cfg("mlp", optimizer="sgd", lr=0.5)
    single = _local(SingleStrategy, cfg)
    good, broken = _local(TwinStrategy, cfg), _local(UnaveragedTwin, cfg)
    assert compare_runs(good, single, 1e-5).equal
    eq = compare_runs(broken, single, 1e-5)
    assert not eq.equal and eq.worst_step > 0 and broken.problems == []  # copies agree, but wrongly


def test_rows_carry_host_cost_per_device_and_phases(twins):
    cmp = run_comparison(_cfg("mlp", strategies=("twin",), steps=5, warmup_steps=2))
    single, twin = cmp.records
    for row in (single, twin):
        assert row.host_ms_median is not None and row.host_ms_median > 0
        assert row.gpu_ms_median is None and row.graphs is False  # CPU: no events, no graphs
    assert single.host_ms_per_device == pytest.approx(single.host_ms_median)
    assert twin.host_ms_per_device == pytest.approx(twin.host_ms_median / 2)  # one process drives 2 devices
    assert set(single.host_breakdown_ms) == {"forward", "backward", "optimizer"}
    assert set(twin.host_breakdown_ms) == {"forward", "backward", "reduce"}
    assert sum(twin.host_breakdown_ms.values()) <= twin.host_ms_median * 1.5
    assert "twin: a test strategy" in twin.note  # the strategy's own notes reach its row


def test_losses_stay_on_the_device_until_the_window_ends():
    cfg = _cfg("mlp", steps=3, warmup_steps=1)
    seen = []

    class Spy(SingleStrategy):
        def step(self, step, batch):
            result = super().step(step, batch)
            seen.append(result.loss)
            return result

    run = _local(Spy, cfg)
    assert all(isinstance(v, torch.Tensor) and not v.requires_grad for v in seen)
    assert run.losses == [float(v) for v in seen] and run.window_ms > 0


def test_compare_runs_reports_worst_step_and_names():
    state = {"w": torch.ones(3)}
    ref = RunResult(strategy="single", devices=["cpu"], world_size=1, precision="fp32",
                    losses=[1.0, 2.0, 3.0], state=state)
    other = RunResult(strategy="x", devices=["cpu"], world_size=1, precision="fp32",
                      losses=[1.0, 2.2, 3.0], state={"w": torch.tensor([1.0, 1.0, 1.3])})
    eq = compare_runs(other, ref, 1e-5)
    assert eq.worst_step == 1 and eq.max_loss_rel_diff == pytest.approx(0.1)
    assert eq.max_param_rel_diff == pytest.approx(0.3 / 3**0.5) and eq.worst_param == "w"
    renamed = RunResult(strategy="x", devices=["cpu"], world_size=1, precision="fp32",
                        losses=[1.0, 2.0, 3.0], state={"v": torch.ones(3)})
    assert compare_runs(renamed, ref, 1e-5).max_param_rel_diff == float("inf")
    assert compare_runs(ref, ref, 0.0).equal


def test_dp_not_applicable_on_cpu_and_rows_complete(twins):
    cmp = run_comparison(_cfg("mlp", strategies=("dp", "twin")))
    rows = {r.strategy: r for r in cmp.records}
    assert list(rows) == ["single", "dp", "twin"]
    dp = rows["dp"]
    assert dp.status == "not-applicable" and "CUDA" in dp.note and dp.samples_per_s is None and not dp.losses
    rep = rows["twin"]
    assert rep.status == "ok" and rep.equal_to_single is True and rep.n_devices == 2
    assert rep.samples_per_s > 0 and rep.scaling_efficiency is not None and "CPU" in rep.note
    assert rows["single"].scaling_efficiency == 1.0 and rows["single"].equal_to_single is None


def test_a_strategy_that_raises_is_failed_and_others_still_run(monkeypatch, twins):
    from gpucomm.train import strategies

    class _Raises(SingleStrategy):
        name = "raises"

        def step(self, step, batch):
            raise RuntimeError("boom at step")

    monkeypatch.setitem(strategies.STRATEGIES, "raises", _Raises)
    cmp = run_comparison(_cfg("mlp", strategies=("raises", "twin")))
    rows = {r.strategy: r for r in cmp.records}
    assert rows["raises"].status == "failed" and "boom at step" in rows["raises"].note
    assert rows["twin"].status == "ok"
    assert cmp.failed == [rows["raises"]]


@pytest.mark.parametrize("error", [MemoryError(), torch.cuda.OutOfMemoryError("CUDA out of memory. Tried")])
def test_a_model_that_does_not_fit_is_one_message_and_others_still_run(monkeypatch, twins, error):
    from gpucomm.train import strategies

    class _TooBig(TwinStrategy):
        name = "too-big"

        def prepare(self, workload):
            raise error

    monkeypatch.setitem(strategies.STRATEGIES, "too-big", _TooBig)
    cmp = run_comparison(_cfg("mlp", strategies=("too-big", "twin"), global_batch=8))
    rows = {r.strategy: r for r in cmp.records}
    note = rows["too-big"].note
    assert rows["too-big"].status == "failed" and "\n" not in note
    assert note.startswith("out of host memory") or note.startswith("out of GPU memory")
    assert "strategy 'too-big', model 'mlp', per-device batch 4" in note
    assert rows["twin"].status == "ok" and rows["single"].status == "ok"


def test_bad_batch_from_a_factory_fails_clearly():
    cfg = _cfg("mlp")
    workload = load_workload("mlp")
    bad = type(workload)(name="bad", build_model=workload.build_model,
                         batch_fn=lambda seed, step, b: (torch.randn(b + 1, 256), torch.zeros(b + 1).long()),
                         loss_fn=workload.loss_fn)
    with pytest.raises(ValueError, match="dim 0 = global batch 8, but got 9"):
        run_strategy(TwinStrategy(cfg, cfg.devices), bad, cfg)


def test_global_batch_must_divide_for_ddp_processes():
    from gpucomm.train.config import ConfigError

    with pytest.raises(ConfigError, match="strategy 'ddp'"):
        run_comparison(_cfg("mlp", strategies=("ddp",), nproc=3))


def test_a_diverged_run_is_failed_and_still_recordable(tmp_path, twins):
    from gpucomm.env import collect_env
    from gpucomm.records import RecordWriter, load

    cmp = run_comparison(_cfg("mlp", strategies=("twin",), optimizer="sgd", lr=1e6, steps=5))
    rep = cmp.records[-1]
    assert rep.status == "failed" and "not finite" in rep.note and rep.equal_to_single is False
    with RecordWriter(tmp_path, collect_env("cpu")) as w:  # JSON without NaN: the rows still write
        for r in cmp.records:
            w.write(r)
    assert len(load(tmp_path).train) == 2
