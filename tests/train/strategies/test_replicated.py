"""``replicated`` (gpucomm.parallel.ReplicatedDataParallel, measured): one process (LocalCommunicator), processes
(ProcessGroupCommunicator) and the hybrid (2 processes x 2 devices, gloo), each equal to ``single`` and with
bit-identical replicas.  The library's own tests are in tests/parallel; these check the strategy's use of it."""

import pytest
import torch

from gpucomm.communicator import LocalCommunicator
from gpucomm.parallel.reducer import GradientReducer
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


@pytest.mark.parametrize("model, threads", [("gpt-tiny", True), ("mlp", False)])
def test_local_form_equals_single(single, model, threads):
    run = _run(ReplicatedStrategy, _cfg(model=model), threads=threads)
    assert compare_runs(run, single[model], 1e-5).equal
    assert run.problems == []
    assert run.comm_ms is not None and len(run.comm_ms) == 3  # CPU: host time inside the all-reduces, per step
    phases = run.host_phases_ms[0]
    assert {"forward", "loss", "backward", "all_reduce", "optimizer"} <= set(phases)


def test_given_local_communicator_is_used_and_buckets_prepared_once():
    calls = []

    class Counting(LocalCommunicator):
        def prepare(self, op, /, tensors, *args, **kwargs):
            calls.append(op)
            return super().prepare(op, tensors, *args, **kwargs)

    cfg = _cfg(bucket_cap_mb=0.01, first_bucket_mb=0.001)
    strategy = ReplicatedStrategy(cfg, cfg.devices, communicator=Counting(cfg.devices))
    run = run_strategy(strategy, load_workload("gpt-tiny"), cfg)
    buckets = strategy.model._reducer.buckets
    assert len(buckets) > 5
    assert calls == ["all_reduce"] * len(buckets)  # once per bucket, at construction, never per step
    assert run.problems == []


def test_checks_catch_broken_reductions(single, monkeypatch):
    cfg = _cfg(model="mlp", optimizer="sgd", lr=0.5)
    plain = _run(SingleStrategy, cfg)
    assert compare_runs(_run(ReplicatedStrategy, cfg), plain, 1e-5).equal
    real = GradientReducer._launch

    def no_average(self, bucket):  # broken on purpose: sums without dividing by the replica count
        n, self.n_total = self.n_total, 1
        real(self, bucket)
        self.n_total = n

    monkeypatch.setattr(GradientReducer, "_launch", no_average)
    wrong = _run(ReplicatedStrategy, cfg)
    assert not compare_runs(wrong, plain, 1e-5).equal and wrong.problems == []  # replicas agree, but wrongly
    monkeypatch.setattr(GradientReducer, "_launch", lambda self, bucket: None)  # every replica on its own shard
    missing = _run(ReplicatedStrategy, _cfg())
    assert "differs from replica 0" in missing.problems[0]


def test_graph_path_on_cpu_gives_the_eager_losses_exactly(monkeypatch):
    """The CUDA-graph path with capture replaced by a recorder that runs what it recorded (SGD: capturable on
    CPU): the strategy captures before the first step and replays after, with the eager step's results."""
    from gpucomm.parallel import graphs

    made = []

    class Recorded:
        def __init__(self, fn, what):
            self.fn, self.what = fn, what

        def replay(self):
            self.fn()

    monkeypatch.setattr(graphs, "capture", lambda fn, **kw: made.append(Recorded(fn, kw["what"])) or made[-1])
    monkeypatch.setattr(graphs, "unavailable", lambda devices: None)
    for cls in (SingleStrategy, ReplicatedStrategy):
        cfg = _cfg(model="mlp", optimizer="sgd", lr=0.5)
        eager = _run(cls, cfg)
        cfg.graphs = True  # after validation, which refuses graphs on CPU (the capture is replaced above)
        strategy = cls(cfg, cls.devices_needed(cfg))
        graphed = run_strategy(strategy, load_workload("mlp"), cfg)
        assert graphed.losses == eager.losses and graphed.graphs and graphed.problems == []
        assert compare_runs(graphed, eager, 0.0).max_param_rel_diff == 0.0
        expected = {"load", "replay"} if cls is SingleStrategy else {"load", "forward_backward", "all_reduce",
                                                                     "optimizer"}
        assert set(graphed.host_phases_ms[0]) == expected
    assert len(made) == 1 + 4  # single: one graph; replicated: forward+backward and optimizer per replica


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


# ----- over processes (gloo): the hybrid and one device per process, in one spawn ---------------------------
FORMS = [(2, 4), (2, 2)]  # (processes, devices): 2 x 2 replicas (the hybrid), then 2 x 1


def _rank_body(model: str):
    import gpucomm.dist as gd

    rank, world = gd.get_rank(), gd.get_world_size()
    out = []
    for nproc, ndev in FORMS:
        cfg = _cfg(model=model, devices=["cpu"] * ndev, nproc=nproc, global_batch=8)
        devices = ReplicatedStrategy.rank_devices(cfg, rank, world)
        strategy = ReplicatedStrategy(cfg, devices, rank=rank, world_size=world)
        run = run_strategy(strategy, load_workload(model), cfg, world_size=world)
        out.append({"losses": run.losses, "problems": run.problems, "replicas": len(strategy.replicas),
                    "state": {k: v.tolist() for k, v in run.state.items()}})
    return out


@pytest.mark.slow
def test_over_processes_equals_single(single):
    results = spawn(_rank_body, "gpt-tiny", world_size=2)
    check_ranks([p for r in results for form in r for p in form["problems"]])
    reference = single["gpt-tiny"]
    for f, (nproc, ndev) in enumerate(FORMS):
        forms = [r[f] for r in results]
        assert [x["replicas"] for x in forms] == [ndev // nproc] * nproc
        assert forms[1]["state"] == forms[0]["state"], "rank 1's parameters differ from rank 0's"
        # each rank's loss is the mean over its own half; their mean is the global-batch loss
        losses = [sum(x["losses"][s] for x in forms) / nproc for s in range(len(reference.losses))]
        state = {k: torch.tensor(v) for k, v in forms[0]["state"].items()}
        run = RunResult(strategy="replicated", devices=["cpu"] * ndev, world_size=nproc, precision="fp32",
                        losses=losses, state=state)
        assert compare_runs(run, reference, 1e-5).equal, (nproc, ndev)


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
