"""single, replicated (CPU devices) and ddp (gloo, 2 processes) train identically; the checks can fail."""

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
from gpucomm.train.strategies import DDPStrategy, ReplicatedStrategy, SingleStrategy, names, register

HERE = Path(__file__).parent
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
    """Every model under single, replicated and ddp; all ddp runs share one 2-process launch."""
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
                              "replicated": _local(ReplicatedStrategy, cfg)}
        yield out
    finally:
        sys.path.remove(str(HERE))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("strategy", ["replicated", "ddp"])
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


@pytest.mark.parametrize("model", MODELS)
def test_replicas_bit_identical(runs, model):
    assert runs[model]["replicated"].problems == []


def test_replicated_replicas_equal_and_buckets_launched_from_hooks():
    cfg = _cfg("gpt-tiny", bucket_cap_mb=0.01, first_bucket_mb=0.001, steps=2, warmup_steps=0)
    strategy = ReplicatedStrategy(cfg, cfg.devices)
    calls = {"hook": 0, "late": 0}
    real_finish = ReplicatedStrategy._finish_comm

    def finish(self):
        before = sum(self._launched)
        calls["hook"] += before
        calls["late"] += len(self._launched) - before
        return real_finish(self)

    strategy._finish_comm = finish.__get__(strategy)
    result = run_strategy(strategy, load_workload("gpt-tiny"), cfg)
    assert len(strategy.buckets) > 5
    assert calls == {"hook": 2 * len(strategy.buckets), "late": 0}  # every bucket launched during backward
    for a, b in zip(strategy.replicas[0].parameters(), strategy.replicas[1].parameters(), strict=True):
        assert torch.equal(a, b)
    assert result.comm_ms is not None and all(t >= 0 for t in result.comm_ms)


def test_replicated_without_threads_matches_threads(runs):
    cfg = _cfg("gpt-tiny")
    plain = _local(ReplicatedStrategy, cfg, threads=False)
    assert compare_runs(plain, runs["gpt-tiny"]["replicated"], 1e-6).equal


class _NoAllReduce(ReplicatedStrategy):
    """Broken on purpose: every replica steps on its own shard's gradient."""

    name = "replicated-no-allreduce"

    def _launch(self, bucket):
        self._launched[bucket] = True


class _NoAverage(ReplicatedStrategy):
    """Broken on purpose: sums gradients without dividing by the device count."""

    name = "replicated-no-average"

    def _launch(self, bucket):
        self._launched[bucket] = True
        tensors = [b[bucket] for b in self._buffers]
        self._all_reduce(tensors, op="sum", out=tensors)


def test_checks_catch_a_missing_all_reduce(runs):
    cfg = _cfg("gpt-tiny")
    broken = _local(_NoAllReduce, cfg)
    assert broken.problems and "differs from replica 0" in broken.problems[0]
    assert not compare_runs(broken, runs["gpt-tiny"]["single"], 1e-5).equal


def test_checks_catch_a_wrong_averaging_factor_with_sgd():
    cfg = _cfg("mlp", optimizer="sgd", lr=0.5)
    single = _local(SingleStrategy, cfg)
    good, broken = _local(ReplicatedStrategy, cfg), _local(_NoAverage, cfg)
    assert compare_runs(good, single, 1e-5).equal
    eq = compare_runs(broken, single, 1e-5)
    assert not eq.equal and eq.worst_step > 0 and broken.problems == []  # replicas agree, but wrongly


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


def test_dp_not_applicable_on_cpu_and_rows_complete(runs):
    cmp = run_comparison(_cfg("mlp", strategies=("dp", "replicated")))
    rows = {r.strategy: r for r in cmp.records}
    assert list(rows) == ["single", "dp", "replicated"]
    dp = rows["dp"]
    assert dp.status == "not-applicable" and "CUDA" in dp.note and dp.samples_per_s is None and not dp.losses
    rep = rows["replicated"]
    assert rep.status == "ok" and rep.equal_to_single is True and rep.n_devices == 2
    assert rep.samples_per_s > 0 and rep.scaling_efficiency is not None and "CPU" in rep.note
    assert rows["single"].scaling_efficiency == 1.0 and rows["single"].equal_to_single is None


def test_a_strategy_that_raises_is_failed_and_others_still_run(monkeypatch):
    from gpucomm.train import strategies

    class _Raises(SingleStrategy):
        name = "raises"

        def step(self, step, batch):
            raise RuntimeError("boom at step")

    monkeypatch.setitem(strategies.STRATEGIES, "raises", _Raises)
    cmp = run_comparison(_cfg("mlp", strategies=("raises", "replicated")))
    rows = {r.strategy: r for r in cmp.records}
    assert rows["raises"].status == "failed" and "boom at step" in rows["raises"].note
    assert rows["replicated"].status == "ok"
    assert cmp.failed == [rows["raises"]]


def test_bad_batch_from_a_factory_fails_clearly():
    cfg = _cfg("mlp")
    workload = load_workload("mlp")
    bad = type(workload)(name="bad", build_model=workload.build_model,
                         batch_fn=lambda seed, step, b: (torch.randn(b + 1, 256), torch.zeros(b + 1).long()),
                         loss_fn=workload.loss_fn)
    with pytest.raises(ValueError, match="dim 0 = global batch 8, but got 9"):
        run_strategy(ReplicatedStrategy(cfg, cfg.devices), bad, cfg)


def test_global_batch_must_divide_for_ddp_processes():
    from gpucomm.train.config import ConfigError

    with pytest.raises(ConfigError, match="strategy 'ddp'"):
        run_comparison(_cfg("mlp", strategies=("ddp",), nproc=3))


def test_a_diverged_run_is_failed_and_still_recordable(tmp_path):
    from gpucomm.records import RecordWriter, collect_env, load

    cmp = run_comparison(_cfg("mlp", strategies=("replicated",), optimizer="sgd", lr=1e6, steps=5))
    rep = cmp.records[-1]
    assert rep.status == "failed" and "not finite" in rep.note and rep.equal_to_single is False
    with RecordWriter(tmp_path, collect_env("cpu")) as w:  # JSON without NaN: the rows still write
        for r in cmp.records:
            w.write(r)
    assert len(load(tmp_path).train) == 2
