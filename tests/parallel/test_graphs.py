"""gpucomm.parallel.graphs and ReplicatedDataParallel(graphs=True): warm-up undo, static buffers, constraints.

On CPU, :func:`graphs.capture` is replaced by a recorder whose ``replay()`` runs the recorded segment, so the
whole graph path (static buffers, warm-up then restore, the all-reduce between segments, averaging, clipping
and zeroing inside the optimizer segment) runs and must give the eager results *exactly* (fp32, same
kernels).  The real capture is checked on a GPU at the end.
"""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from gpucomm.parallel import GraphCaptureError, ReplicatedDataParallel, graphs
from gpucomm.testing import requires_gpus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _twin import BF16, CPU3, batch, mlp, param_rel

sys.path.pop(0)


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


def _sgd(devices, graphed, model=mlp, **kw):
    return ReplicatedDataParallel(model(), devices, torch.optim.SGD, lr=0.05, momentum=0.9, graphs=graphed, **kw)


@pytest.mark.parametrize("devices", [CPU3, ["cpu"]])
def test_graph_steps_give_the_eager_results_exactly(recorded, devices):
    eager, graphed = _sgd(devices, False), _sgd(devices, True)
    for s in range(4):
        x, y = batch(s, 9)
        a = eager.train_step(x, y, loss_fn=F.cross_entropy, max_norm=0.3)
        b = graphed.train_step(x, y, loss_fn=F.cross_entropy, max_norm=0.3)
        assert float(a) == float(b)  # warm-up was undone: the first step starts from the same state
        assert graphed.verify_replicas() == []
    assert param_rel(graphed.module, eager.module) == 0.0
    expected = ["replica 0 (cpu) step"] if len(devices) == 1 else \
        [f"replica {r} (cpu) forward+backward" for r in range(3)] + [f"replica {r} (cpu) optimizer step" for r in range(3)]
    assert [g.what for g in recorded] == expected
    assert all(g.replays == 4 for g in recorded)  # one replay per step, nothing eager after capture
    assert graphed._reducer is None or len(graphed._reducer.buckets) == 1  # one flat buffer: one all-reduce


def test_host_phases_of_a_graphed_step(recorded):
    rdp = _sgd(CPU3, True)
    seen = []
    rdp.host_phase = lambda name: seen.append(name) or torch.enable_grad()
    x, y = batch(0, 9)
    rdp.train_step(x, y, loss_fn=F.cross_entropy)
    seen.clear()
    rdp.train_step(x, y, loss_fn=F.cross_entropy)
    assert seen == ["load"] + ["forward_backward"] * 3 + ["all_reduce"] + ["optimizer"] * 3
    assert rdp._reducer._hooks == []  # no overlap hooks: the all-reduce runs between the segments


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _replayed_step_work(devices, depth):
    """(tensor operations, Python calls) of one replayed step, the replays themselves no-ops."""
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(depth)], nn.Linear(8, 4))
    rdp = ReplicatedDataParallel(model, devices, torch.optim.SGD, lr=0.1, momentum=0.9, graphs=True)
    x, y = batch(0, 9)
    for _ in range(2):
        rdp.train_step(x, y, loss_fn=F.cross_entropy)  # capture, then a replay
    with _Ops() as seen:
        rdp.train_step(x, y, loss_fn=F.cross_entropy)
    calls = [0]

    def count(frame, event, arg):
        calls[0] += event == "call"

    sys.setprofile(count)
    try:
        rdp.train_step(x, y, loss_fn=F.cross_entropy)
    finally:
        sys.setprofile(None)
    return seen.ops, calls[0]


@pytest.mark.parametrize("devices", [CPU3, ["cpu"]])
def test_a_replayed_steps_host_work_does_not_grow_with_the_model(monkeypatch, devices):
    """Around the replays the host does the same tensor operations and the same number of Python calls for a
    model six times deeper: nothing loops over parameters; the batch is one copy per tensor per replica."""
    monkeypatch.setattr(graphs, "capture", lambda fn, **kw: type("G", (), {"replay": staticmethod(lambda: None)}))
    monkeypatch.setattr(graphs, "unavailable", lambda devices: None)
    (ops, calls), (deep_ops, deep_calls) = _replayed_step_work(devices, 1), _replayed_step_work(devices, 6)
    assert ops == deep_ops and calls == deep_calls
    assert ops.count("aten.copy_.default") == 2 * len(devices)  # inputs and targets, once per replica
    assert ops.count("aten.add.Tensor") == len(devices) - 1  # the loss: the graphs weighted each replica's term
    assert not [op for op in ops if "mul" in op or "_to_copy" in op]


def test_constraints_name_the_fix(recorded):
    rdp = _sgd(CPU3, True)
    x, y = batch(0, 9)
    with pytest.raises(RuntimeError, match="graphs=True a training forward runs inside the captured step"):
        rdp(x)
    with torch.no_grad():
        assert rdp(x).gather().shape == (9, 4)  # inference stays eager
    with pytest.raises(RuntimeError, match="part of the captured step; call train_step"):
        rdp.optimizer.step()
    rdp.train_step(x, y, loss_fn=F.cross_entropy)
    with rdp.no_sync(), pytest.raises(RuntimeError, match="no_sync: a captured step always all-reduces"):
        rdp.train_step(x, y, loss_fn=F.cross_entropy)
    with pytest.raises(GraphCaptureError, match=r"dynamic shapes: step 1's batch tensor 0 is \[6, 8\] torch.float32, but the graph was captured "
                       r"with \[9, 8\].*drop the uneven"):
        rdp.train_step(*batch(1, 6), loss_fn=F.cross_entropy)
    with pytest.raises(ValueError, match=r"train_step: expected the loss_fn, max_norm the CUDA graph was captured with"):
        rdp.train_step(x, y, loss_fn=lambda o, t: F.cross_entropy(o, t), max_norm=1.0)
    rdp.optimizer.param_groups[0]["lr"] = 0.01  # SGD reads its lr as a constant: a captured one
    with pytest.raises(ValueError, match=r"param_groups\[0\]\['lr'\]: expected 0.05, the value the CUDA graph captured"):
        rdp.train_step(x, y, loss_fn=F.cross_entropy)


def test_constraints_checked_before_anything_is_built(monkeypatch):
    net = mlp()
    with pytest.raises(ValueError, match="graphs: expected CUDA devices for graphs=True, but got cpu"):
        ReplicatedDataParallel(net, CPU3, torch.optim.SGD, lr=0.1, graphs=True)
    monkeypatch.setattr(graphs, "unavailable", lambda devices: None)
    with pytest.raises(ValueError, match=r"optimizer: expected a capturable optimizer.*capturable=True"):
        ReplicatedDataParallel(net, CPU3, torch.optim.AdamW, lr=0.1, graphs=True)
    with pytest.raises(ValueError, match="output_device: expected None with graphs=True"):
        ReplicatedDataParallel(net, CPU3, torch.optim.SGD, lr=0.1, graphs=True, output_device="cpu")
    assert all(p.grad is None for p in net.parameters())


class _Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.used, self.spare = nn.Linear(8, 4), nn.Linear(8, 4)

    def forward(self, x):
        return self.used(x)


def test_a_parameter_without_gradient_is_refused_and_the_warm_up_undone(recorded):
    rdp = _sgd(CPU3, True, model=_Unused)
    before = [p.clone() for p in rdp.module.parameters()]
    with pytest.raises(GraphCaptureError, match=r"but 'spare.weight', 'spare.bias' got none.*requires_grad_\(False\)"):
        rdp.train_step(*batch(0, 9), loss_fn=F.cross_entropy)
    assert all(torch.equal(a, b) for a, b in zip(before, rdp.module.parameters(), strict=True))


def test_warm_up_restores_a_loaded_optimizer_state():
    model = nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()  # a state to keep (a resumed checkpoint)
    kept = {k: v.clone() for k, v in opt.state[model.weight].items()}
    before = {k: v.clone() for k, v in model.state_dict().items()}
    snap = graphs._Snapshot([model], [opt])
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    snap.restore()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    assert all(torch.equal(opt.state[model.weight][k], v) for k, v in kept.items())
    fresh = torch.optim.AdamW(model.parameters(), lr=0.1)
    snap = graphs._Snapshot([model], [fresh])
    model(torch.randn(4, 3)).sum().backward()
    fresh.step()
    snap.restore()  # state made by the warm-up goes back to zeros: AdamW's initial state
    assert all(float(s["step"]) == 0.0 and not s["exp_avg"].any() for s in fresh.state.values())


def test_batch_loader_splits_the_global_batch_into_each_replicas_buffers_and_checks_it_first():
    def example(rows):
        return torch.zeros(rows, 3), {"a": torch.zeros(rows), "b": torch.zeros(rows, dtype=torch.long)}

    cpu = torch.device("cpu")
    static = [graphs.StaticBatch(example(rows), cpu) for rows in (3, 2, 2)]  # 7 samples: split's shares
    load = graphs.BatchLoader(static)
    x, a, b = torch.randn(7, 3), torch.arange(7.0), torch.arange(7)
    load((x, {"a": a, "b": b}), 5)
    for sb, rows in zip(static, torch.tensor_split(torch.arange(7), 3), strict=True):
        assert torch.equal(sb.inputs, x[rows]) and torch.equal(sb.targets["a"], a[rows])
        assert torch.equal(sb.targets["b"], b[rows])
    assert all(sb.inputs.data_ptr() != x.data_ptr() for sb in static)  # copies into the fixed buffers
    before = [sb.inputs.clone() for sb in static]
    with pytest.raises(GraphCaptureError, match="step 7's batch has 2 tensor"):
        load((x, a), 7)
    with pytest.raises(GraphCaptureError, match=r"batch tensor 0 is \[7, 3\] torch.float64, but the graph was "
                                                r"captured with \[7, 3\] torch.float32"):
        load((x.double(), {"a": a, "b": b}), 8)
    with pytest.raises(GraphCaptureError, match=r"batch tensor 2 is \[6\] torch.int64.*\[7\] torch.int64"):
        load((x, {"a": a, "b": b[:6]}), 9)
    assert all(torch.equal(sb.inputs, old) for sb, old in zip(static, before, strict=True))  # nothing copied


def test_unavailable_and_warmup_argument():
    assert "but got cpu" in graphs.unavailable([torch.device("cpu")])
    if not torch.cuda.is_available():
        assert "does not have" in graphs.unavailable([torch.device("cuda:0")])
    with pytest.raises(ValueError, match="warmup: expected an integer >= 1"):
        graphs.StepGraphs([], warmup=0)


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
    with pytest.raises(GraphCaptureError, match=r"replica 1 \(cuda:0\) step cannot be captured.*graphs=False"):
        if torch.cuda.is_available():
            graphs.capture(lambda: torch.zeros(1, device="cuda").item(), device=torch.device("cuda:0"),
                           stream=torch.cuda.Stream(), pool=None, what="replica 1 (cuda:0) step")
        else:
            graphs.capture(lambda: None, device=torch.device("cuda:0"), stream=None, pool=None,
                           what="replica 1 (cuda:0) step")


# ----- on a GPU: real capture ---------------------------------------------------------------------------
def _gpu(devices, graphed, **kw):
    torch.manual_seed(0)
    return ReplicatedDataParallel(mlp().cuda(), devices, torch.optim.AdamW, lr=1e-2, fused=True,
                                  capturable=graphed, graphs=graphed, **kw)


@requires_gpus(1)
@pytest.mark.parametrize("devices", [["cuda:0"], ["cuda:0", "cuda:0"]])
def test_gpu_graphs_equal_eager_with_a_scheduler_bf16(devices):
    runs = []
    for graphed in (False, True):
        rdp = _gpu(devices, graphed)
        sched = torch.optim.lr_scheduler.LambdaLR(rdp.optimizer, lambda s: 1.0 / (1 + s))
        losses = []
        for s in range(5):
            x, y = (t.pin_memory() for t in batch(s, 8))
            with torch.autocast("cuda", dtype=torch.bfloat16):
                losses.append(rdp.train_step(x, y, loss_fn=F.cross_entropy, max_norm=1.0))
            sched.step()
            assert rdp.verify_replicas() == []
        runs.append(([float(v) for v in losses], rdp))
    (eager, a), (graphed, b) = runs
    assert all(abs(p - q) <= BF16 * abs(q) for p, q in zip(graphed, eager, strict=True))
    assert param_rel(b.module, a.module) <= BF16
    sd = b.optimizer.state_dict()
    assert isinstance(sd["param_groups"][0]["lr"], float) and sd["param_groups"][0]["lr"] == 1.0 / 6 * 1e-2


class _Masked(nn.Linear):
    def forward(self, x):
        return super().forward(x[x.abs() < 1e9].view(x.shape))  # a boolean mask: a data-dependent shape


@requires_gpus(1)
def test_gpu_host_sync_in_forward_is_named():
    rdp = ReplicatedDataParallel(_Masked(8, 4).cuda(), ["cuda:0"], torch.optim.SGD, lr=0.1, graphs=True)
    with pytest.raises(GraphCaptureError, match="synchronises the host"):
        rdp.train_step(*batch(0, 8), loss_fn=F.cross_entropy)
