"""gpucomm.train.graphs: --graphs is gpucomm.parallel's CUDA graphs with the comparison's optimizer.

The graph machinery itself is tested in tests/parallel/test_graphs.py; the strategies' graph paths (with the
capture replaced on CPU) in tests/train/strategies; here: the optimizer, the wrapper, errors that name
--graphs, the real capture of both strategies on a GPU, and benchmarks/train_graphs.py.
"""

import pytest
import torch

from gpucomm.parallel import GraphCaptureError, ReplicatedDataParallel
from gpucomm.parallel import graphs as parallel_graphs
from gpucomm.testing.markers import requires_gpus
from gpucomm.train import graphs
from gpucomm.train.compare import compare_runs
from gpucomm.train.config import TOLERANCES, TrainConfig
from gpucomm.train.loop import run_strategy
from gpucomm.train.models import Workload, load_workload
from gpucomm.train.strategies import ReplicatedStrategy, SingleStrategy
from gpucomm.train.strategies.base import make_optimizer


def _cfg(**kw):
    base = dict(strategies=("single", "replicated"), model="mlp", steps=4, warmup_steps=1, global_batch=8,
                devices=["cpu", "cpu"], precision="fp32")
    return TrainConfig(**{**base, **kw})


def _run(cls, cfg, graphed, workload=None):
    cfg.graphs = graphed
    return run_strategy(cls(cfg, cls.devices_needed(cfg)), workload or load_workload(cfg.model), cfg)


def test_capturable_optimizer_and_the_wrapper():
    p = torch.nn.Parameter(torch.zeros(2))
    assert isinstance(graphs.capturable_optimizer([p], torch.device("cpu"), "sgd", 0.1), torch.optim.SGD)
    adamw = graphs.capturable_optimizer([p], torch.device("cpu"), "adamw", 0.1)
    assert adamw.param_groups[0]["capturable"] is True
    cfg = _cfg()
    model = graphs.wrap(torch.nn.Linear(3, 2), cfg.devices, cfg, make_optimizer)
    assert isinstance(model, ReplicatedDataParallel) and not model.graphs
    assert isinstance(model.optimizer.optimizers[1], torch.optim.AdamW)


def test_strategies_on_cpu_say_graphs_need_cuda():
    cfg = _cfg()
    cfg.graphs = True
    for cls in (SingleStrategy, ReplicatedStrategy):
        assert "CUDA graphs need CUDA devices, but got cpu" in cls.not_applicable(cfg)
        with pytest.raises(GraphCaptureError, match="--graphs: CUDA graphs need CUDA devices.*run without --graphs"):
            cls(cfg, cls.devices_needed(cfg)).prepare(load_workload("gpt-tiny"))
    cfg.graphs = False
    assert SingleStrategy.not_applicable(cfg) is None and ReplicatedStrategy.not_applicable(cfg) is None


def _changing_shapes() -> Workload:
    base = load_workload("mlp")

    def batch_fn(seed, step, global_batch):
        x, y = base.batch_fn(seed, step, global_batch)
        return (x, y) if step == 0 else (x[:, :-1], y)

    return Workload(name="mlp-dynamic", build_model=base.build_model, batch_fn=batch_fn, loss_fn=base.loss_fn)


@pytest.mark.parametrize("cls", [SingleStrategy, ReplicatedStrategy])
def test_dynamic_shapes_are_refused_with_the_reason(monkeypatch, cls):
    monkeypatch.setattr(parallel_graphs, "capture", lambda fn, **kw: type("G", (), {"replay": staticmethod(fn)}))
    monkeypatch.setattr(parallel_graphs, "unavailable", lambda devices: None)
    cfg = _cfg(optimizer="sgd")
    with pytest.raises(GraphCaptureError, match=r"dynamic shapes: step 1's batch tensor 0 is \[\d+, 255\]"):
        _run(cls, cfg, True, workload=_changing_shapes())


# ----- on a GPU: real capture ---------------------------------------------------------------------------
def _gpu_cfg(**kw):
    base = dict(strategies=("single", "replicated"), model="gpt-tiny", steps=6, warmup_steps=1, global_batch=8,
                devices=["cuda:0", "cuda:0"])
    return TrainConfig(**{**base, **kw})


@requires_gpus(1)
def test_gpu_graph_losses_equal_eager_and_replicas_bit_identical():
    cfg = _gpu_cfg()
    workload = load_workload("gpt-tiny")
    single = _run(SingleStrategy, cfg, False, workload)
    tol = TOLERANCES["bf16-autocast"]
    for cls in (SingleStrategy, ReplicatedStrategy):
        graphed = _run(cls, cfg, True, workload)
        assert graphed.precision == "bf16-autocast"
        eq = compare_runs(graphed, single, tol)
        assert eq.equal, (cls.name, eq)
        assert graphed.problems == []


@requires_gpus(1)
def test_gpu_fp32_graphs_match_eager_closely():
    cfg = _gpu_cfg(model="mlp", precision="fp32")
    workload = load_workload("mlp")
    for cls in (SingleStrategy, ReplicatedStrategy):
        eager, graphed = _run(cls, cfg, False, workload), _run(cls, cfg, True, workload)
        assert compare_runs(graphed, eager, 1e-5).equal, cls.name
        assert graphed.problems == []


class _SyncingMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(256, 16)

    def forward(self, x):
        if self.lin.weight.sum().item() > 1e9:  # a host sync inside forward
            x = x * 2
        return self.lin(x)


@requires_gpus(1)
def test_gpu_host_sync_in_forward_is_named():
    base = load_workload("mlp")
    workload = Workload(name="syncing", build_model=_SyncingMLP, batch_fn=base.batch_fn, loss_fn=base.loss_fn)
    cfg = _gpu_cfg(model="mlp", precision="fp32")
    eager = _run(SingleStrategy, cfg, False, workload)  # the eager run stands (compare runs it first)
    assert len(eager.losses) == cfg.steps
    with pytest.raises(GraphCaptureError, match="synchronises the host"):
        _run(SingleStrategy, cfg, True, workload)


# ----- benchmarks/train_graphs.py --------------------------------------------------------------------------
def _bench():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "train_graphs.py"
    spec = importlib.util.spec_from_file_location("train_graphs_bench", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_graphs_bench"] = module
    spec.loader.exec_module(module)
    return module


_TINY = ["--model", "gpt-tiny", "--batch", "2", "--replicas", "2", "--blocks", "2", "--block-steps", "1",
         "--warmup", "0"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU form")
def test_benchmark_cpu_form_times_eager_and_says_graphs_are_unavailable(tmp_path, capsys):
    import json

    assert _bench().main(["--device", "cpu", *_TINY, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    txt = next(tmp_path.glob("train-graphs_cpu_*.txt")).read_text()
    assert txt in out.replace(f"wrote {tmp_path}", "")  # printed as written
    assert "# command: python benchmarks/train_graphs.py --device cpu --model gpt-tiny" in txt
    assert "graphs: unavailable on this device; eager timed only" in txt and "CPU numbers" in txt
    lines = [json.loads(line) for line in next(tmp_path.glob("train-graphs_cpu_*.jsonl")).read_text().splitlines()]
    assert lines[0]["env"]["model"] == "gpt-tiny"
    rows = {(r["form"], r["mode"]): r for r in lines[1:]}
    assert list(rows) == [("single", "eager"), ("single", "graphs"), ("replicated x2", "eager"),
                          ("replicated x2", "graphs")]
    assert rows[("single", "graphs")]["status"] == "unavailable"
    rep = rows[("replicated x2", "eager")]
    assert rep["status"] == "ok" and rep["losses_match"] and rep["vs_single_eager_max_rel"] <= 1e-5
    assert rep["host_ms_per_replica"] > 0 and rep["gpu_ms_per_replica"] is None
    assert {"forward", "backward", "all_reduce", "optimizer"} <= set(rep["host_phases_ms_per_replica"])
    for line in txt.splitlines():
        if not line.startswith(("#", "[")):
            assert len(line) <= 80, line


def test_benchmark_bad_flags_are_usage_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _bench().main(["--device", "cpu", "--replicas", "1", "--out", str(tmp_path / "x")])
    assert exc.value.code == 2 and "--replicas: expected integers >= 2" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as exc:
            _bench().main(["--device", "cuda", "--out", str(tmp_path / "x")])
        assert exc.value.code == 2 and "CUDA is not available here" in capsys.readouterr().err
        assert not (tmp_path / "x").exists()


@requires_gpus(1)
def test_benchmark_tiny_gpu_form(tmp_path):
    import json

    flags = ["--device", "cuda", *_TINY, "--block-steps", "3", "--out", str(tmp_path), "--hardware", "test"]
    assert _bench().main(flags) == 0  # 3 steps per block: host-timed, GPU-timed, launch-timed
    rows = [json.loads(line) for line in (next(tmp_path.glob("train-graphs_test_*.jsonl"))).read_text().splitlines()]
    graphed = [r for r in rows[1:] if r["mode"] == "graphs"]
    assert len(graphed) == 2 and all(r["status"] == "ok" and r["losses_match"] for r in graphed)
    assert all(r["gpu_ms_per_replica"] > 0 and r["ratio"] > 0 and r["ratio_of"] == "launch" for r in graphed)
    assert all(r["launch_ms_per_replica"] > 0 for r in graphed)


def test_benchmark_launch_timer_subtracts_the_syncs_it_inserts(monkeypatch):
    """Launch time = the step's clock minus the synchronisations inserted before each (nested) phase."""
    import contextlib
    import time

    bench = _bench()

    class Fake:
        def __init__(self):
            self.seen = []

        @contextlib.contextmanager
        def host_phase(self, name):
            yield

        def take_host_phases(self):
            return {}

        def step(self, s, batch):
            with self.host_phase("backward"):
                time.sleep(0.005)
                with self.host_phase("all_reduce"):
                    time.sleep(0.005)
            with self.host_phase("optimizer"):
                pass
            self.seen.append(s)
            return type("R", (), {"loss": 1.0})()

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: time.sleep(0.05))  # a slow "drain"
    timer = bench._Timer.__new__(bench._Timer)
    timer.cuda = False  # no outer syncs; only the inserted per-phase ones (patched above)
    fake = Fake()
    launch, loss, phases = timer.launch(fake, 7, None)
    assert fake.seen == [7] and loss == 1.0
    assert 10 <= launch < 40  # 3 inserted syncs (150 ms) are not counted; the 10 ms of work is
    assert 5 <= phases["backward"] < 35 and 5 <= phases["all_reduce"] < 30  # the nested sync is not in backward
    assert "host_phase" not in vars(fake)  # the class's own phase timer is back
