"""``replicated`` on a Communicator: one process (LocalCommunicator), processes (ProcessGroupCommunicator)
and the hybrid (2 processes x 2 devices, gloo), each equal to ``single`` and with bit-identical replicas."""

import pytest
import torch

from gpucomm.communicator import LocalCommunicator
from gpucomm.testing import check_ranks, spawn
from gpucomm.testing.markers import requires_gpus
from gpucomm.train.compare import compare_runs
from gpucomm.train.config import TrainConfig
from gpucomm.train.loop import RunResult, run_strategy
from gpucomm.train.models import load_workload
from gpucomm.train.strategies import ReplicatedStrategy, SingleStrategy


def _cfg(**kw) -> TrainConfig:
    base = dict(strategies=("single", "replicated"), model="gpt-tiny", steps=3, warmup_steps=1, global_batch=8,
                devices=["cpu", "cpu"], precision="fp32")
    return TrainConfig(**{**base, **kw})


def _run(cls, cfg, **kw) -> RunResult:
    return run_strategy(cls(cfg, cls.devices_needed(cfg), **kw), load_workload(cfg.model), cfg)


@pytest.fixture(scope="module")
def single():
    return {m: _run(SingleStrategy, _cfg(model=m)) for m in ("gpt-tiny", "mlp")}


@pytest.mark.parametrize("model", ["gpt-tiny", "mlp"])
@pytest.mark.parametrize("threads", [True, False])
def test_local_form_equals_single(single, model, threads):
    run = _run(ReplicatedStrategy, _cfg(model=model), threads=threads)
    assert compare_runs(run, single[model], 1e-5).equal
    assert run.problems == []


def test_given_local_communicator_is_used_and_buckets_prepared_once():
    calls = []

    class Counting(LocalCommunicator):
        def prepare(self, op, /, tensors, *args, **kwargs):
            calls.append(op)
            return super().prepare(op, tensors, *args, **kwargs)

    cfg = _cfg(bucket_cap_mb=0.01, first_bucket_mb=0.001)
    strategy = ReplicatedStrategy(cfg, cfg.devices, communicator=Counting(cfg.devices))
    run = run_strategy(strategy, load_workload("gpt-tiny"), cfg)
    assert len(strategy.buckets) > 5
    assert calls == ["all_reduce"] * len(strategy.buckets)  # once per bucket, in prepare, never per step
    assert run.problems == []


def test_graph_mode_reduces_one_flat_buffer_per_step(monkeypatch, single):
    """With graphs the gradients are one flat buffer per replica and a step runs ONE prepared all-reduce."""
    from gpucomm.train import graphs

    class _Recorded:
        def __init__(self, fn):
            self.fn = fn

        def replay(self):
            self.fn()

    monkeypatch.setattr(graphs, "capture", lambda fn, **kw: _Recorded(fn))
    monkeypatch.setattr(graphs, "unavailable", lambda devices: None)
    prepared, runs = [], []

    class Counting(LocalCommunicator):
        def prepare(self, op, /, tensors, *args, **kwargs):
            prepared.append(op)
            inner = super().prepare(op, tensors, *args, **kwargs)
            return lambda: (runs.append(op), inner())[1]

    cfg = _cfg(bucket_cap_mb=0.01, first_bucket_mb=0.001)  # small caps: ignored with graphs
    cfg.graphs = True  # after validation, which refuses graphs on CPU (the capture is replaced above)
    strategy = ReplicatedStrategy(cfg, cfg.devices, communicator=Counting(cfg.devices))
    run = run_strategy(strategy, load_workload("gpt-tiny"), cfg)
    params = list(strategy.replicas[0].parameters())
    assert len(strategy.buckets) == 1 and sorted(strategy.buckets[0]) == list(range(len(params)))
    for model, (flat,) in zip(strategy.replicas, strategy._buffers, strict=True):
        assert all(p.grad.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
                   for p in model.parameters())
    assert prepared == ["all_reduce"]
    warmup = graphs.WARMUP_ITERATIONS
    assert len(runs) == cfg.steps + warmup  # one per step (warm-up steps included) and per capture warm-up
    assert compare_runs(run, single["gpt-tiny"], 1e-5).equal
    assert run.problems == []


def test_buckets_launch_in_order_from_the_hooks():
    cfg = _cfg(bucket_cap_mb=0.01, first_bucket_mb=0.001, steps=2, warmup_steps=0)
    strategy = ReplicatedStrategy(cfg, cfg.devices, threads=True)
    order: list[int] = []
    real = ReplicatedStrategy._launch

    def launch(self, bucket):
        order.append(bucket)
        real(self, bucket)

    strategy._launch = launch.__get__(strategy)
    late = []
    real_finish = ReplicatedStrategy._finish_comm
    strategy._finish_comm = (lambda self: (late.append(len(self.buckets) - sum(self._launched)),
                                           real_finish(self))[1]).__get__(strategy)
    run_strategy(strategy, load_workload("gpt-tiny"), cfg)
    n = len(strategy.buckets)
    assert order == list(range(n)) * 2  # every step, every bucket once, in bucket order
    assert late == [0, 0]  # all launched from gradient hooks, during backward


class _NoAverage(ReplicatedStrategy):
    """Broken on purpose: sums gradients without dividing by the participant count."""

    def _launch(self, bucket):
        self._launched[bucket] = True
        for call in self._reducers[bucket]:
            call()


class _NoAllReduce(ReplicatedStrategy):
    """Broken on purpose: every replica steps on its own shard's gradient."""

    def _launch(self, bucket):
        self._launched[bucket] = True


def test_checks_catch_broken_reductions(single):
    cfg = _cfg(model="mlp", optimizer="sgd", lr=0.5)
    plain = _run(SingleStrategy, cfg)
    assert compare_runs(_run(ReplicatedStrategy, cfg), plain, 1e-5).equal
    wrong = _run(_NoAverage, cfg)
    assert not compare_runs(wrong, plain, 1e-5).equal and wrong.problems == []  # replicas agree, but wrongly
    missing = _run(_NoAllReduce, _cfg())
    assert "differs from replica 0" in missing.problems[0]


def test_bad_communicator_arguments():
    cfg = _cfg()
    with pytest.raises(TypeError, match="communicator: expected a gpucomm Communicator or None, but got list"):
        ReplicatedStrategy(cfg, cfg.devices, communicator=["cpu"])
    strategy = ReplicatedStrategy(cfg, cfg.devices, communicator=LocalCommunicator(["cpu"] * 3))
    with pytest.raises(ValueError, match=r"holding this process's devices \['cpu', 'cpu'\], but it holds"):
        strategy.prepare(load_workload("gpt-tiny"))


def test_what_it_says_about_itself():
    cfg = _cfg(devices=["cpu"] * 4, nproc=2)
    assert ReplicatedStrategy.world_size(cfg) == 2 and ReplicatedStrategy.world_size(_cfg()) == 1
    assert ReplicatedStrategy.rank_devices(cfg, 1, 2) == [torch.device("cpu")] * 2
    assert "2 processes x 2 replicas each" in ReplicatedStrategy.notes(cfg)[0]
    assert ReplicatedStrategy.notes(_cfg(replicated_threads=False))[0] == "replicas run one after another (no threads)"
    assert ReplicatedStrategy.not_applicable(cfg) is None


def test_nccl_processes_may_not_share_a_gpu():
    cfg = TrainConfig.__new__(TrainConfig)  # a CUDA config on a machine without CUDA: the fields read here
    for name, value in dict(graphs=False, nproc=2, devices=[torch.device("cuda:0")] * 2).items():
        object.__setattr__(cfg, name, value)
    assert "would share cuda:0" in ReplicatedStrategy.not_applicable(cfg)


# ----- over processes (gloo): the pure multi-process form and the hybrid -----------------------------------
def _rank_body(nproc: int, ndev: int, model: str):
    import gpucomm.dist as gd

    rank, world = gd.get_rank(), gd.get_world_size()
    cfg = _cfg(model=model, devices=["cpu"] * ndev, nproc=nproc, global_batch=8)
    devices = ReplicatedStrategy.rank_devices(cfg, rank, world)
    strategy = ReplicatedStrategy(cfg, devices, rank=rank, world_size=world)
    run = run_strategy(strategy, load_workload(model), cfg, world_size=world)
    forms = (type(strategy._local).__name__ if strategy._local else None,
             type(strategy._group).__name__ if strategy._group else None)
    return {"losses": run.losses, "problems": run.problems, "forms": forms,
            "state": {k: v.tolist() for k, v in run.state.items()}}


@pytest.mark.parametrize("nproc, ndev, forms", [
    (2, 4, ("LocalCommunicator", "ProcessGroupCommunicator")),   # hybrid: 2 processes x 2 devices
    (2, 2, (None, "ProcessGroupCommunicator")),                  # one device per process
])
def test_over_processes_equals_single(single, nproc, ndev, forms):
    results = spawn(_rank_body, nproc, ndev, "gpt-tiny", world_size=nproc)
    check_ranks([r["problems"] for r in results])
    reference = single["gpt-tiny"]
    for rank, r in enumerate(results):
        assert tuple(r["forms"]) == forms
        # each rank's loss is the mean over its own shards; their mean is the global-batch loss
        assert r["state"] == results[0]["state"], f"rank {rank}'s parameters differ from rank 0's"
    losses = [sum(r["losses"][s] for r in results) / nproc for s in range(len(reference.losses))]
    state = {k: torch.tensor(v) for k, v in results[0]["state"].items()}
    run = RunResult(strategy="replicated", devices=["cpu"] * ndev, world_size=nproc, precision="fp32",
                    losses=losses, state=state)
    assert compare_runs(run, reference, 1e-5).equal


@requires_gpus(1)
def test_gpu_local_form_on_a_repeated_device():
    cfg = _cfg(devices=["cuda:0", "cuda:0"], precision="fp32", model="mlp", steps=4)
    single_run = _run(SingleStrategy, cfg)
    strategy = ReplicatedStrategy(cfg, cfg.devices)
    run = run_strategy(strategy, load_workload("mlp"), cfg)
    assert compare_runs(run, single_run, 1e-5).equal and run.problems == []
    comm = run.comm_ms  # the loop read the strategy's CUDA-event comm times after its final synchronize
    assert comm is not None and len(comm) == cfg.steps and all(t > 0 for t in comm)
    assert strategy.take_comm_ms() == []  # read once


def _cuda_rank_body(devices: list[str], graphs: bool):
    import gpucomm.dist as gd

    rank, world = gd.get_rank(), gd.get_world_size()
    cfg = TrainConfig(strategies=("single", "replicated"), model="gpt-tiny", steps=4, warmup_steps=1,
                      global_batch=8, devices=devices, nproc=world, graphs=graphs)
    strategy = ReplicatedStrategy(cfg, ReplicatedStrategy.rank_devices(cfg, rank, world), rank=rank,
                                  world_size=world)
    run = run_strategy(strategy, load_workload("gpt-tiny"), cfg, world_size=world)
    return {"losses": run.losses, "problems": run.problems}


def _over_nccl(devices: list[str], graphs: bool) -> None:
    results = spawn(_cuda_rank_body, devices, graphs, world_size=2, backend="nccl")
    check_ranks([r["problems"] for r in results])
    cfg = TrainConfig(strategies=("single",), model="gpt-tiny", steps=4, warmup_steps=1, global_batch=8,
                      devices=devices[:1])
    reference = _run(SingleStrategy, cfg)
    losses = [sum(r["losses"][s] for r in results) / 2 for s in range(cfg.steps)]
    tol = 3e-2  # bf16 autocast (TOLERANCES["bf16-autocast"])
    assert all(abs(a - b) <= tol * abs(b) for a, b in zip(losses, reference.losses, strict=True))


@pytest.mark.parametrize("graphs", [False, True])
@requires_gpus(2)
def test_gpu_one_gpu_per_process_over_nccl(graphs):
    _over_nccl(["cuda:0", "cuda:1"], graphs)


@pytest.mark.parametrize("graphs", [False, True])
@requires_gpus(4)
def test_gpu_hybrid_over_nccl(graphs):
    _over_nccl(["cuda:0", "cuda:1", "cuda:2", "cuda:3"], graphs)
