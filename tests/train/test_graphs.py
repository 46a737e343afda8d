"""gpucomm.train.graphs: the eager/graph switch, warm-up undo, static buffers and capture errors.

On CPU, :func:`graphs.capture` is replaced by a recorder whose ``replay()`` runs the recorded segment,
so the whole graph path of ``single`` and ``replicated`` (static buffers, warm-up then restore, the
collective between segments, averaging and zeroing inside the optimizer segment) runs and must give
the eager losses *exactly* (fp32, same kernels).  The real capture is checked on a GPU.
"""

import pytest
import torch

from gpucomm.testing.markers import requires_gpus
from gpucomm.train import graphs
from gpucomm.train.compare import compare_runs
from gpucomm.train.config import TOLERANCES, TrainConfig
from gpucomm.train.loop import run_strategy
from gpucomm.train.models import Workload, load_workload
from gpucomm.train.strategies import ReplicatedStrategy, SingleStrategy


class _Recorded:
    """A stand-in for a CUDA graph: ``replay()`` runs what capture recorded (and counts)."""

    def __init__(self, fn, what):
        self.fn, self.what, self.replays = fn, what, 0

    def replay(self):
        self.replays += 1
        self.fn()


@pytest.fixture
def recorded(monkeypatch):
    made = []

    def capture(fn, *, device, stream, pool, what):
        made.append(_Recorded(fn, what))
        return made[-1]

    monkeypatch.setattr(graphs, "capture", capture)
    monkeypatch.setattr(graphs, "unavailable", lambda devices: None)
    return made


def _cfg(**kw):
    base = dict(strategies=("single", "replicated"), model="gpt-tiny", steps=4, warmup_steps=1, global_batch=8,
                devices=["cpu", "cpu"], precision="fp32")
    return TrainConfig(**{**base, **kw})


def _run(cls, cfg, graphed, workload=None):
    cfg.graphs = graphed
    return run_strategy(cls(cfg, cls.devices_needed(cfg)), workload or load_workload(cfg.model), cfg)


@pytest.mark.parametrize("cls", [SingleStrategy, ReplicatedStrategy])
@pytest.mark.parametrize("model", ["gpt-tiny", "mlp"])
def test_graph_path_gives_the_eager_losses_exactly(recorded, cls, model):
    cfg = _cfg(model=model)
    eager, graphed = _run(cls, cfg, False), _run(cls, cfg, True)
    assert graphed.losses == eager.losses  # warm-up was undone: step 0 starts from the same state
    assert compare_runs(graphed, eager, 0.0).max_param_rel_diff == 0.0
    assert graphed.problems == []
    expected = ["replica 0 (cpu) step"] if cls is SingleStrategy else \
        ["replica 0 (cpu) forward+backward", "replica 1 (cpu) forward+backward",
         "replica 0 (cpu) optimizer step", "replica 1 (cpu) optimizer step"]
    assert [g.what for g in recorded] == expected
    assert all(g.replays == cfg.steps for g in recorded)  # one replay per step, nothing run eagerly after


def test_sgd_averaging_inside_the_optimizer_segment(recorded):
    cfg = _cfg(model="mlp", optimizer="sgd", lr=0.5)  # SGD shows a wrong averaging factor at once
    single, graphed = _run(SingleStrategy, cfg, False), _run(ReplicatedStrategy, cfg, True)
    assert compare_runs(graphed, single, 1e-5).equal


def test_graph_mode_reports_host_phases_and_no_threads(recorded):
    cfg = _cfg()
    cfg.graphs = True
    strategy = ReplicatedStrategy(cfg, cfg.devices)
    assert strategy.use_threads is False
    result = run_strategy(strategy, load_workload("gpt-tiny"), cfg)
    assert set(result.host_phases_ms[0]) == {"load", "forward_backward", "all_reduce", "optimizer"}
    assert strategy._hooks == []  # no overlap hooks: the all-reduce runs between the segments


def _changing_shapes() -> Workload:
    base = load_workload("mlp")

    def batch_fn(seed, step, global_batch):
        x, y = base.batch_fn(seed, step, global_batch)
        return (x, y) if step == 0 else (x[:, :-1], y)

    return Workload(name="mlp-dynamic", build_model=base.build_model, batch_fn=batch_fn, loss_fn=base.loss_fn)


@pytest.mark.parametrize("cls", [SingleStrategy, ReplicatedStrategy])
def test_dynamic_shapes_are_refused_with_the_reason(recorded, cls):
    cfg = _cfg(model="mlp")
    with pytest.raises(graphs.GraphCaptureError, match=r"dynamic shapes: step 1's batch tensor 0 is \[\d+, 255\]"):
        _run(cls, cfg, True, workload=_changing_shapes())


def test_warmup_must_make_the_optimizer_state_first():
    with pytest.raises(ValueError, match="warmup: expected an integer >= 1"):
        graphs.StepGraphs([], warmup=0)


def test_static_batch_copies_and_checks_structure():
    sb = graphs.StaticBatch((torch.zeros(2, 3), (torch.zeros(2), torch.zeros(2, dtype=torch.long))), torch.device("cpu"))
    x = torch.randn(2, 3)
    sb.load((x, (torch.ones(2), torch.ones(2, dtype=torch.long))), 5)
    assert torch.equal(sb.inputs, x) and sb.inputs is not x
    with pytest.raises(graphs.GraphCaptureError, match="step 7's batch has 2 tensor"):
        sb.load((x, torch.ones(2)), 7)
    with pytest.raises(graphs.GraphCaptureError, match="torch.float64"):
        sb.load((x.double(), (torch.ones(2), torch.ones(2, dtype=torch.long))), 8)


def test_strategies_on_cpu_say_graphs_need_cuda():
    cfg = _cfg()
    cfg.graphs = True
    for cls in (SingleStrategy, ReplicatedStrategy):
        assert "CUDA graphs need CUDA devices, but got cpu" in cls.not_applicable(cfg)
        with pytest.raises(graphs.GraphCaptureError, match="need CUDA devices.*run without --graphs"):
            cls(cfg, cls.devices_needed(cfg)).prepare(load_workload("gpt-tiny"))
    cfg.graphs = False
    assert SingleStrategy.not_applicable(cfg) is None and ReplicatedStrategy.not_applicable(cfg) is None


def test_unavailable():
    assert "but got cpu" in graphs.unavailable([torch.device("cpu"), torch.device("cpu")])
    if not torch.cuda.is_available():
        assert "does not have" in graphs.unavailable([torch.device("cuda:0")])


def _raise_chain():
    try:
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nCUDA kernel errors...")
    except RuntimeError:
        raise RuntimeError("CUDA error: operation failed due to a previous error during capture") from None


def test_capture_reason_finds_the_host_sync_in_the_chain():
    try:
        try:
            _raise_chain()
        except RuntimeError as inner:
            raise RuntimeError("capture_end failed") from inner
    except RuntimeError as exc:
        reason = graphs.capture_reason(exc)
    assert reason.startswith("the step synchronises the host with the GPU (e.g. .item()")
    assert "torch: CUDA error: operation not permitted when stream is capturing)" in reason
    assert graphs.capture_reason(ValueError("odd")) == "capture failed with ValueError: odd"


def test_capture_wraps_failures_and_names_the_segment():
    with pytest.raises(graphs.GraphCaptureError, match=r"--graphs: replica 1 \(cuda:0\) step cannot be captured"):
        if torch.cuda.is_available():
            graphs.capture(lambda: torch.zeros(1, device="cuda").item(), device=torch.device("cuda:0"),
                           stream=torch.cuda.Stream(), pool=None, what="replica 1 (cuda:0) step")
        else:
            graphs.capture(lambda: None, device=torch.device("cuda:0"), stream=None, pool=None,
                           what="replica 1 (cuda:0) step")


def test_restore_resets_adamw_to_its_initial_state():
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    snap = graphs._Snapshot([model], [opt])
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    snap.restore()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    for state in opt.state.values():
        assert float(state["step"]) == 0.0
        assert not state["exp_avg"].any() and not state["exp_avg_sq"].any()


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
    with pytest.raises(graphs.GraphCaptureError, match="synchronises the host"):
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
