"""ReplicatedDataParallel against one-device training of the same model, seed and global batch.

Every feature of a training loop on CPU devices ``["cpu"] * 3``: losses and parameters within fp32 1e-5
relative (bf16 autocast 3e-2), replicas bit-identical after every step, checkpoints moving between one
device, this and DDP (gloo, world 2), and the process-group forms.  GPU forms at the end.
"""

import gc
import sys
import weakref
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from gpucomm.parallel import PerReplica, ReplicatedDataParallel, ReplicatedOptimizer
from gpucomm.testing import check_ranks, requires_gpus, spawn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _twin import (
    BF16,
    CPU3,
    FP32,
    MultiIO,
    assert_equal_runs,
    batch,
    mlp,
    multi_batch,
    multi_loss,
    param_rel,
)

sys.path.pop(0)

SIZES = [12, 10, 7, 3]  # 7 and 3 split unevenly over 3 replicas (3/2/2 and 1/1/1)


def _pair(model_fn=mlp, devices=CPU3, opt=torch.optim.AdamW, **kw):
    """(wrapper, one-device model, its optimizer), from the same initial weights."""
    kw = {"lr": 1e-2, **kw}
    single = model_fn()
    opt_kw = {k: v for k, v in kw.items() if k not in ("threads", "output_device", "broadcast_buffers",
                                                       "bucket_cap_mb", "first_bucket_mb", "graphs")}
    return ReplicatedDataParallel(model_fn(), devices, opt, **kw), single, opt(single.parameters(), **opt_kw)


def _single_step(model, opt, x, y, loss_fn=F.cross_entropy):
    return _single_loss_step(opt, loss_fn(model(x), y))


def _single_loss_step(opt, loss):
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.item()


def _step(rdp, x, y, loss_fn=F.cross_entropy, problems=None):
    loss = rdp.loss(loss_fn, rdp(x), y)
    loss.backward()
    rdp.optimizer.step()
    rdp.optimizer.zero_grad()
    if problems is None:
        assert rdp.verify_replicas() == []  # bit-identical after every step
    else:
        problems += rdp.verify_replicas()  # across processes: collected, the parent reports them by rank
    return loss.item()


def _assert_trains_as_one_device(rdp, single, opt, sizes=SIZES):
    """Train both on the same batches (every one of ``sizes``): equal losses and parameters, identical replicas."""
    losses, ref = [], []
    for s, size in enumerate(sizes):
        x, y = batch(s, size)
        losses.append(_step(rdp, x, y))
        ref.append(_single_step(single, opt, x, y))
    assert_equal_runs(losses, ref, rdp.module, single)


@pytest.mark.parametrize("threads", [True, False])
def test_plain_loop_equals_one_device_with_uneven_batches(threads):
    rdp, single, opt = _pair(threads=threads)
    assert isinstance(rdp.optimizer, ReplicatedOptimizer) and rdp.module is not single
    _assert_trains_as_one_device(rdp, single, opt)


def test_threads_or_not_give_the_same_bits():
    a, _, _ = _pair(threads=True)
    b, _, _ = _pair(threads=False)
    for s, size in enumerate(SIZES):
        x, y = batch(s, size)
        assert _step(a, x, y) == _step(b, x, y)
    assert all(torch.equal(p, q) for p, q in zip(a.module.parameters(), b.module.parameters(), strict=True))


def test_forward_splits_in_order_and_outputs_stay_per_replica():
    rdp, single, _ = _pair()
    x, _ = batch(0, 7)
    out = rdp(x)
    assert isinstance(out, PerReplica) and len(out) == 3 and out.sizes == (3, 2, 2)
    assert [o.shape[0] for o in out] == [3, 2, 2] and "samples [3, 2, 2]" in repr(out)
    torch.testing.assert_close(out.gather(), single(x), rtol=0, atol=1e-6)
    torch.testing.assert_close(out.gather("cpu"), single(x), rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["dict", "dataclass", "tuple"])
def test_tuple_and_dict_inputs_multi_output_models(kind):
    rdp, single, opt = _pair(lambda: MultiIO(kind))
    losses, ref = [], []
    for s, size in enumerate([9, 8]):
        pair, extra, targets = multi_batch(s, size)
        out = rdp(pair, extra=extra, scale=0.5)  # a non-tensor keyword goes to every replica
        loss = rdp.loss(multi_loss, out, targets)
        loss.backward()
        rdp.optimizer.step()
        rdp.optimizer.zero_grad()
        losses.append(loss.item())
        ref.append(_single_loss_step(opt, multi_loss(single(pair, extra=extra, scale=0.5), targets)))
        assert rdp.verify_replicas() == []
    assert_equal_runs(losses, ref, rdp.module, single)
    gathered = out.gather()
    if kind == "dataclass":
        assert gathered.note == "dataclass" and gathered.logits.shape == (8, 4)
    elif kind == "dict":
        assert set(gathered) == {"logits", "aux"} and gathered["aux"].shape == (8,)
    else:
        assert isinstance(gathered, tuple) and gathered[0].shape == (8, 4)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_gathered_outputs_and_sum_losses(reduction):
    """A loss on gathered outputs (output_device, DataParallel's way) and a sum-reduced loss are exact too."""
    rdp, single, opt = _pair(output_device="cpu", opt=torch.optim.SGD, lr=0.05)
    plain, _, _ = _pair(opt=torch.optim.SGD, lr=0.05)
    fn = lambda o, y: F.cross_entropy(o, y, reduction=reduction)  # noqa: E731
    losses, plain_losses, ref = [], [], []
    for s, size in enumerate(SIZES):
        x, y = batch(s, size)
        loss = fn(rdp(x), y)  # gathered: an ordinary tensor on cpu
        loss.backward()
        rdp.optimizer.step()
        rdp.optimizer.zero_grad()
        losses.append(loss.item())
        plain_losses.append(float(plain.train_step(x, y, loss_fn=fn, reduction=reduction)))
        ref.append(_single_step(single, opt, x, y, fn))
    assert_equal_runs(losses, ref, rdp.module, single)  # SGD: a wrong gradient factor would show at once
    assert_equal_runs(plain_losses, ref, plain.module, single)


def test_schedulers_and_clipping_by_global_norm():
    rdp, single, opt = _pair()
    sched = torch.optim.lr_scheduler.OneCycleLR(rdp.optimizer, max_lr=0.05, total_steps=6)
    sched_1 = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=6)
    losses, ref = [], []
    for s, size in enumerate(SIZES + [12, 12]):
        x, y = batch(s, size)
        loss = rdp.loss(F.cross_entropy, rdp(x), y)
        loss.backward()
        norm = rdp.clip_grad_norm_(0.05)  # small: clipping is active
        rdp.optimizer.step()
        lr = rdp.optimizer.param_groups[0]["lr"]
        assert all(o.param_groups[0]["lr"] == lr for o in rdp.optimizer.optimizers)  # every replica stepped with it
        rdp.optimizer.zero_grad()
        sched.step()
        loss_1 = F.cross_entropy(single(x), y)
        loss_1.backward()
        norm_1 = torch.nn.utils.clip_grad_norm_(single.parameters(), 0.05)
        opt.step()
        opt.zero_grad()
        sched_1.step()
        assert abs(float(norm) - float(norm_1)) <= FP32 * float(norm_1) and float(norm_1) > 0.05
        assert rdp.optimizer.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
        losses.append(loss.item())
        ref.append(loss_1.item())
        assert rdp.verify_replicas() == []
    assert_equal_runs(losses, ref, rdp.module, single)


@pytest.mark.parametrize("no_sync", [True, False])
def test_gradient_accumulation(no_sync):
    """Three micro-batches per step: with no_sync (one all-reduce at the last) or without (three), both exact."""
    rdp, single, opt = _pair(opt=torch.optim.SGD, lr=0.1)
    calls = []
    rdp.host_phase = lambda name: calls.append(name) or torch.enable_grad()
    losses, ref = [], []
    for s in range(2):
        micro = [batch(10 * s + m, size) for m, size in enumerate([8, 7, 5])]
        total = 0.0
        for m, (x, y) in enumerate(micro):
            ctx = rdp.no_sync() if no_sync and m < 2 else torch.enable_grad()
            with ctx:
                loss = rdp.loss(F.cross_entropy, rdp(x), y) / 3
            loss.backward()
            total += loss.item()
        rdp.optimizer.step()
        rdp.optimizer.zero_grad()
        losses.append(total)
        acc = 0.0
        for x, y in micro:
            loss_1 = F.cross_entropy(single(x), y) / 3
            loss_1.backward()
            acc += loss_1.item()
        opt.step()
        opt.zero_grad()
        ref.append(acc)
        assert rdp.verify_replicas() == []
    assert_equal_runs(losses, ref, rdp.module, single)
    reduces = calls.count("all_reduce") // len(rdp._reducer.buckets)
    assert reduces == (2 if no_sync else 6)  # one all-reduce per step with no_sync, one per micro-batch without


def test_bf16_autocast_reaches_every_replica_thread():
    seen = []

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp()

        def forward(self, x):
            seen.append(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None)
            return self.net(x)

    rdp, single, opt = _pair(Probe)
    losses, ref = [], []
    for s, size in enumerate(SIZES[:3]):
        x, y = batch(s, size)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = rdp.loss(F.cross_entropy, rdp(x), y)
        loss.backward()
        rdp.optimizer.step()
        rdp.optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_1 = F.cross_entropy(single(x), y)
        loss_1.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        ref.append(loss_1.item())
        assert rdp.verify_replicas() == []
    assert set(seen) == {torch.bfloat16}  # DataParallel's threads would not see the caller's dtype
    assert_equal_runs(losses, ref, rdp.module, single, BF16)


def test_fp16_autocast_with_a_grad_scaler():
    rdp, single, opt = _pair()
    scaler, scaler_1 = torch.amp.GradScaler("cpu", init_scale=2.0 ** 14), torch.amp.GradScaler("cpu", init_scale=2.0 ** 14)
    losses, ref = [], []
    for s, size in enumerate(SIZES):
        x, y = batch(s, size)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = rdp.loss(F.cross_entropy, rdp(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(rdp.optimizer)  # every replica's gradients (the groups list them all)
        rdp.clip_grad_norm_(1.0)
        scaler.step(rdp.optimizer)
        scaler.update()
        rdp.optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss_1 = F.cross_entropy(single(x), y)
        scaler_1.scale(loss_1).backward()
        scaler_1.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(single.parameters(), 1.0)
        scaler_1.step(opt)
        scaler_1.update()
        opt.zero_grad()
        losses.append(loss.item())
        ref.append(loss_1.item())
        assert rdp.verify_replicas() == []
    assert scaler.get_scale() == scaler_1.get_scale()
    assert_equal_runs(losses, ref, rdp.module, single, BF16)


def test_eval_no_grad_and_inference_mode():
    rdp, single, _ = _pair(lambda: nn.Sequential(mlp(), nn.Dropout(0.5)))
    x, _ = batch(0, 10)
    rdp.eval()
    single.eval()
    assert not rdp.training and all(not m.training for m in rdp.replicas)
    with torch.no_grad():
        out = rdp(x).gather()
    assert not out.requires_grad
    torch.testing.assert_close(out, single(x), rtol=0, atol=1e-6)
    with torch.inference_mode():
        assert rdp(x)[0].is_inference()
    assert all(p.grad is None or not p.grad.any() for p in rdp.module.parameters())
    assert rdp.train() is rdp and all(m.training for m in rdp.replicas)


class _Branchy(nn.Module):
    """``rare`` is used only on odd steps: on even steps it gets no gradient (and one device skips it)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.body, self.rare, self.frozen = nn.Linear(8, 4), nn.Linear(8, 4), nn.Linear(8, 4)
        self.frozen.requires_grad_(False)

    def forward(self, x, use_rare: bool):
        return self.body(x) + self.frozen(x) + (self.rare(x) if use_rare else 0)


def test_parameters_without_gradients_are_skipped_as_on_one_device():
    rdp, single, opt = _pair(_Branchy, weight_decay=0.1)
    losses, ref = [], []
    for s, size in enumerate(SIZES):
        x, y = batch(s, size)
        use = s % 2 == 1
        loss = rdp.loss(F.cross_entropy, rdp(x, use), y)
        loss.backward()
        assert all((m.rare.weight.grad is None) != use for m in rdp.replicas)  # None, as on one device
        rdp.optimizer.step()
        rdp.optimizer.zero_grad()
        losses.append(loss.item())
        ref.append(_single_loss_step(opt, F.cross_entropy(single(x, use), y)))
        assert rdp.verify_replicas() == []
    assert_equal_runs(losses, ref, rdp.module, single)
    assert torch.equal(rdp.module.frozen.weight, single.frozen.weight)
    assert rdp.optimizer.state_dict()["state"].keys() == opt.state_dict()["state"].keys()


class _Checkpointed(nn.Module):
    def __init__(self, reentrant: bool):
        super().__init__()
        torch.manual_seed(9)
        self.a, self.b, self.c, self.reentrant = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4), reentrant

    def forward(self, x):
        h = torch.utils.checkpoint.checkpoint(self._middle, torch.tanh(self.a(x)), use_reentrant=self.reentrant)
        return self.c(h)

    def _middle(self, h):
        return torch.tanh(self.b(h))


@pytest.mark.parametrize("reentrant", [True, False])
def test_activation_checkpointing(reentrant):
    rdp, single, opt = _pair(lambda: _Checkpointed(reentrant), opt=torch.optim.SGD, lr=0.1)
    _assert_trains_as_one_device(rdp, single, opt)


def test_buffers_follow_replica_0_and_replicas_stay_identical():
    def bn():
        torch.manual_seed(7)
        return nn.Sequential(nn.BatchNorm1d(8), nn.Linear(8, 4))

    rdp, _, _ = _pair(bn)
    x, y = batch(0, 9)
    _step(rdp, x, y)  # verify_replicas covers buffers: equal after the step
    expected = 0.1 * x[:3].mean(0)  # momentum 0.1 from zeros, replica 0's shard: samples 0..2
    torch.testing.assert_close(rdp.module[0].running_mean, expected)
    assert int(rdp.replicas[2][0].num_batches_tracked) == 1
    own, _, _ = _pair(bn, broadcast_buffers=False)
    _step_unchecked = own.loss(F.cross_entropy, own(x), y)
    _step_unchecked.backward()
    own.optimizer.step()
    torch.testing.assert_close(own.replicas[2][0].running_mean, 0.1 * x[6:].mean(0))  # its own shard's


def test_state_dicts_equal_one_device_and_round_trip(tmp_path):
    rdp, single, opt = _pair()
    for s, size in enumerate(SIZES[:2]):
        x, y = batch(s, size)
        _step(rdp, x, y)
        _single_step(single, opt, x, y)
    sd, osd = rdp.state_dict(), rdp.optimizer.state_dict()
    assert list(sd) == list(single.state_dict())
    ref = opt.state_dict()
    assert osd["param_groups"] == ref["param_groups"] and osd["state"].keys() == ref["state"].keys()
    for i, st in osd["state"].items():
        for k, v in st.items():
            torch.testing.assert_close(v, ref["state"][i][k], rtol=1e-4, atol=1e-7)
    torch.save({"model": sd, "opt": osd}, tmp_path / "ckpt.pt")

    # this -> one device: continue both from the checkpoint
    ckpt = torch.load(tmp_path / "ckpt.pt")
    resumed = mlp(seed=99)
    resumed.load_state_dict(ckpt["model"])
    r_opt = torch.optim.AdamW(resumed.parameters(), lr=1e-2)
    r_opt.load_state_dict(ckpt["opt"])
    # one device -> this
    back = ReplicatedDataParallel(mlp(seed=42), CPU3, torch.optim.AdamW, lr=1e-2)
    back.load_state_dict(ckpt["model"])
    back.optimizer.load_state_dict(ckpt["opt"])
    assert back.verify_replicas() == []
    losses, a, b = [], [], []
    for s, size in enumerate(SIZES[2:], start=2):
        x, y = batch(s, size)
        losses.append(_step(rdp, x, y))
        a.append(_single_step(resumed, r_opt, x, y))
        b.append(_step(back, x, y))
    assert_equal_runs(losses, a, rdp.module, resumed)
    assert losses == b and param_rel(back.module, rdp.module) == 0.0  # loading is exact


def test_train_step_equals_the_written_out_loop():
    a, _, _ = _pair()
    b, _, _ = _pair()
    for s, size in enumerate(SIZES):
        x, y = batch(s, size)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = a.train_step(x, y, loss_fn=F.cross_entropy, max_norm=0.5)
            loss = b.loss(F.cross_entropy, b(x), y)
        assert not got.requires_grad
        loss.backward()
        b.clip_grad_norm_(0.5)
        b.optimizer.step()
        b.optimizer.zero_grad()
        assert float(got) == loss.item()
    assert param_rel(a.module, b.module) == 0.0


def test_one_device_is_the_plain_loop():
    rdp, single, opt = _pair(devices=["cpu"])
    assert rdp._reducer is None and rdp.optimizer.param_groups is rdp.optimizer.optimizers[0].param_groups
    for s, size in enumerate(SIZES):
        x, y = batch(s, size)
        assert _step(rdp, x, y) == _single_step(single, opt, x, y)  # the same computation, bit for bit
    assert param_rel(rdp.module, single) == 0.0


class _Created(TorchDispatchMode):
    """Weak references to every tensor an operation makes inside the block, to weigh those still alive."""

    def __init__(self):
        super().__init__()
        self.refs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.refs += [weakref.ref(t) for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        return out

    def alive_bytes(self):
        gc.collect()
        storages = {}
        for ref in self.refs:
            if (t := ref()) is not None:
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return sum(storages.values())


def _alive_at_backward(step):
    """Bytes of the tensors made by ``step(loss_fn)`` that are still alive when backward reaches the loss."""
    seen = []

    def loss_fn(out, y):
        loss = F.cross_entropy(out, y)
        loss.grad_fn.register_prehook(lambda grads: seen.append(created.alive_bytes()))
        return loss

    with _Created() as created:
        step(loss_fn)
    assert len(seen) == 1
    return seen[0]


def _wide():
    return mlp(d_in=8, classes=512)  # outputs (batch x 512) outweigh any other activation


def test_one_device_keeps_no_more_alive_at_backward_than_the_plain_loop():
    """The one-device memory target: what is alive when backward starts — activations the graph saved, and
    anything else still referenced — is exactly the plain loop's, in both written forms of the wrapper's loop
    (train_step held its outputs across backward: one output-sized tensor more at the peak)."""
    x, y = batch(0, 64)[0], torch.randint(0, 512, (64,))

    def plain_loop(loss_fn):
        model = _wide()
        loss = loss_fn(model(x), y)
        loss.backward()

    def plain_loop_holding_outputs(loss_fn):
        model = _wide()
        out = model(x)
        loss = loss_fn(out, y)
        loss.backward()

    def wrapped_loop(loss_fn):
        rdp = ReplicatedDataParallel(_wide(), ["cpu"], torch.optim.SGD, lr=0.1)
        loss = rdp.loss(loss_fn, rdp(x), y)
        loss.backward()

    def wrapped_train_step(loss_fn):
        rdp = ReplicatedDataParallel(_wide(), ["cpu"], torch.optim.SGD, lr=0.1)
        rdp.train_step(x, y, loss_fn=loss_fn)

    reference = _alive_at_backward(plain_loop)
    outputs = 64 * 512 * 4
    assert _alive_at_backward(plain_loop_holding_outputs) == reference + outputs  # the measure sees a held output
    assert _alive_at_backward(wrapped_loop) == reference
    assert _alive_at_backward(wrapped_train_step) == reference


# ----- bad input: one line, raised before anything is built or changed --------------------------------------
def _bad_cases():
    net = mlp()
    shared = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    shared[1].to(torch.float64)  # same device, but a stand-in for "elsewhere" is below
    return [
        (lambda: ReplicatedDataParallel(net, [], torch.optim.AdamW), ValueError, r"devices: expected at least one"),
        (lambda: ReplicatedDataParallel(net, ["cpu", "cuda:0"], torch.optim.AdamW), ValueError,
         r"devices: expected devices of one type, but got \['cpu', 'cuda:0'\] \(cpu and cuda\)"),
        (lambda: ReplicatedDataParallel(net, ["cuda:0", "cuda:0"], torch.optim.AdamW), ValueError,
         r"module: expected parameters on cuda:0, the first replica's device, but got cpu .*module.to\('cuda:0'\)"),
        (lambda: ReplicatedDataParallel(net, CPU3, torch.optim.AdamW(net.parameters())), TypeError,
         r"optimizer: expected an optimizer class or a factory.*but got an instance of AdamW.*torch.optim.AdamW, lr=\.\.\."),
        (lambda: ReplicatedDataParallel(net, CPU3, "adamw"), TypeError, r"optimizer: expected an optimizer class"),
        (lambda: ReplicatedDataParallel(nn.DataParallel(net), CPU3, torch.optim.AdamW), TypeError,
         r"module: expected a plain torch.nn.Module, but got a DataParallel wrapper.*its \.module"),
        (lambda: ReplicatedDataParallel(net, CPU3, lambda ps: torch.optim.SGD(mlp().parameters(), lr=1)),
         ValueError, r"optimizer: expected an optimizer over replica 0's parameters"),
        (lambda: ReplicatedDataParallel(net, CPU3, torch.optim.AdamW, graphs=True), ValueError,
         r"graphs: expected CUDA devices for graphs=True, but got cpu; use CUDA devices, or graphs=False"),
        (lambda: ReplicatedDataParallel(net, CPU3, torch.optim.AdamW, bucket_cap_mb=0), ValueError,
         r"bucket_cap_mb: expected a positive finite number, but got 0"),
        (lambda: ReplicatedDataParallel(net, CPU3, torch.optim.AdamW, communicator=["cpu"]), TypeError,
         r"communicator: expected a gpucomm Communicator or None"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_bad_construction_is_one_line_and_changes_nothing(case):
    make, exc, pattern = _bad_cases()[case]
    with pytest.raises(exc, match=pattern) as info:
        make()
    assert "\n" not in str(info.value)


def test_module_on_several_devices_is_refused():
    class Split(nn.Module):  # a "model parallel" module: one parameter on another (meta) device
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.b = nn.Linear(2, 2, device="meta")

    with pytest.raises(ValueError, match=r"module: expected every parameter and buffer on one device.*meta"):
        ReplicatedDataParallel(Split(), CPU3, torch.optim.AdamW)


def test_bad_batches_change_nothing():
    rdp, _, _ = _pair()
    before = [p.clone() for p in rdp.module.parameters()]
    x, y = batch(0, 8)
    cases = [
        (lambda: rdp(x[:2]), r"inputs: expected a batch of at least 3 samples \(one per replica\), but got 2"),
        (lambda: rdp(x, x[:5]), r"inputs\[1\]: expected dim 0 = 8 samples, as inputs\[0\] has, but got 5"),
        (lambda: rdp(torch.tensor(1.0)), r"inputs\[0\]: expected a tensor with a batch dimension"),
        (lambda: rdp(3), r"inputs: expected at least one tensor to split"),
        (lambda: rdp.loss(F.cross_entropy, rdp(x), y[:7]), r"targets: expected dim 0 = 8 samples"),
        (lambda: rdp.loss(F.cross_entropy, rdp(x).gather(), y), r"outputs: expected the PerReplica"),
        (lambda: rdp.loss(F.cross_entropy, rdp(x), y, reduction="none"), r"reduction: expected one of"),
        (lambda: rdp.loss(lambda o, t: F.cross_entropy(o, t, reduction="none"), rdp(x), y),
         r"loss_fn: expected a one-element floating tensor \(replica 0's loss\), but got shape \[3\]"),
    ]
    for make, pattern in cases:
        with pytest.raises((ValueError, TypeError), match=pattern) as info:
            make()
        assert "\n" not in str(info.value)
    assert all(torch.equal(a, b) for a, b in zip(before, rdp.module.parameters(), strict=True))
    with pytest.raises(ValueError, match="closure: expected None"):
        rdp.optimizer.step(lambda: 0)
    with pytest.raises(NotImplementedError, match="add_param_group"):
        rdp.optimizer.add_param_group({"params": [torch.zeros(1, requires_grad=True)]})


def test_optimizer_factories_and_parameter_groups():
    def factory(params):
        decay = [p for p in params if p.dim() >= 2]
        rest = [p for p in params if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                 lr=1e-2)

    rdp = ReplicatedDataParallel(mlp(), CPU3, factory)
    single = mlp()
    opt = factory(list(single.parameters()))
    assert [len(g["params"]) for g in rdp.optimizer.param_groups] == [9, 9]  # 3 replicas x 3 tensors each
    _assert_trains_as_one_device(rdp, single, opt)
    assert rdp.optimizer.state_dict()["param_groups"] == opt.state_dict()["param_groups"]


# ----- across processes (gloo, world 2, one spawn: starting processes is the slow part) -----------------------
STEPS = [(s, 12) for s in range(3)]


def _forms_body(path: str):
    """On each of 2 ranks: the hybrid (2 replicas per process, as gpucomm train --nproc 2 --devices
    cpu,cpu,cpu,cpu), one replica per process, and DDP resuming from this wrapper's checkpoint."""
    import gpucomm.dist as gd
    from gpucomm import ProcessGroupCommunicator

    rank = gd.get_rank()
    result, problems = {}, []
    for k in (2, 1):
        torch.manual_seed(100 + rank)
        # different weights per rank: rank 0's must be broadcast at construction
        rdp = ReplicatedDataParallel(mlp(seed=rank), ["cpu"] * k, torch.optim.AdamW, lr=1e-2,
                                     communicator=ProcessGroupCommunicator(device="cpu"))
        losses = []
        for s, size in STEPS:
            losses.append(_step(rdp, *_half(batch(s, size), rank), problems=problems))
        result[str(k)] = {"losses": losses, "state": {n: v.tolist() for n, v in rdp.state_dict().items()}}
    ckpt = torch.load(f"{path}/rdp.pt")
    net = mlp(seed=77)
    net.load_state_dict(ckpt["model"])
    ddp = nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
    opt.load_state_dict(ckpt["opt"])
    for s, size in STEPS:
        _single_step(ddp, opt, *_half(batch(s, size), rank))
    if rank == 0:
        torch.save({"model": ddp.state_dict(), "opt": opt.state_dict()}, f"{path}/ddp.pt")  # "module." keys
    return {"forms": result, "problems": problems}


def _half(xy, rank):
    return tuple(t[rank * (t.shape[0] // 2):(rank + 1) * (t.shape[0] // 2)] for t in xy)


@pytest.mark.slow
def test_across_processes_and_checkpoints_through_ddp(tmp_path):
    rdp, single, opt = _pair()
    ref_losses = []
    for s, size in STEPS:
        _step(rdp, *batch(s, size))
        ref_losses.append(_single_step(single, opt, *batch(s, size)))
    torch.save({"model": rdp.state_dict(), "opt": rdp.optimizer.state_dict()}, tmp_path / "rdp.pt")
    results = spawn(_forms_body, str(tmp_path), world_size=2)
    check_ranks([r["problems"] for r in results])
    for k in ("2", "1"):  # the process-group forms train as one device does (equal halves: mean of means)
        forms = [r["forms"][k] for r in results]
        losses = [sum(f["losses"][s] for f in forms) / 2 for s in range(len(STEPS))]
        model = mlp()
        model.load_state_dict({n: torch.tensor(v) for n, v in forms[0]["state"].items()})
        assert_equal_runs(losses, ref_losses, model, single)
    for s, size in STEPS:  # one device continues from our checkpoint, as DDP did
        _single_step(single, opt, *batch(s, size))
    ddp = torch.load(tmp_path / "ddp.pt")
    assert all(k.startswith("module.") for k in ddp["model"])
    resumed = ReplicatedDataParallel(mlp(seed=5), CPU3, torch.optim.AdamW, lr=1e-2)
    resumed.load_state_dict(ddp["model"])
    resumed.optimizer.load_state_dict(ddp["opt"])
    assert param_rel(resumed.module, single) <= FP32  # DDP continued from our checkpoint as one device did
    losses, ref = [], []
    for s, size in STEPS:  # and we continue from DDP's as one device does
        x, y = batch(50 + s, size)
        losses.append(_step(resumed, x, y))
        ref.append(_single_step(single, opt, x, y))
    assert_equal_runs(losses, ref, resumed.module, single)


# ----- GPUs -------------------------------------------------------------------------------------------------
def _gpu_pair(devices, **kw):
    torch.manual_seed(0)
    return _pair(lambda: mlp().to(devices[0]), devices=devices, **kw)


@requires_gpus(1)
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16-scaler"])
def test_gpu_repeated_device_equals_one_device(precision):
    rdp, single, opt = _gpu_pair(["cuda:0", "cuda:0"], fused=True)
    rdp.record_comm_time = True
    dtype = {"bf16": torch.bfloat16, "fp16-scaler": torch.float16}.get(precision)
    scaler, scaler_1 = (torch.amp.GradScaler("cuda"), torch.amp.GradScaler("cuda")) if dtype is torch.float16 \
        else (None, None)
    losses, ref = [], []
    for s, size in enumerate(SIZES + SIZES[:2]):
        x, y = (t.pin_memory() for t in batch(s, size))
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            loss = rdp.loss(F.cross_entropy, rdp(x), y)
            loss_1 = F.cross_entropy(single(x.cuda()), y.cuda())
        for lo, o, sc in ((loss, rdp.optimizer, scaler), (loss_1, opt, scaler_1)):
            if sc is None:
                lo.backward()
                o.step()
            else:
                sc.scale(lo).backward()
                sc.step(o)
                sc.update()
            o.zero_grad()
        losses.append(loss.item())
        ref.append(loss_1.item())
        assert rdp.verify_replicas() == []
    torch.cuda.synchronize()
    assert len(rdp.take_comm_ms()) == len(losses)
    assert_equal_runs(losses, ref, rdp.module, single, FP32 if dtype is None else BF16)


@requires_gpus(2)
def test_gpu_two_devices_eager_and_graphs():
    for graphs in (False, True):
        rdp, single, opt = _gpu_pair(["cuda:0", "cuda:1"], graphs=graphs, fused=True, capturable=graphs)
        losses, ref = [], []
        for s in range(4):
            x, y = batch(s, 12)
            losses.append(rdp.train_step(x, y, loss_fn=F.cross_entropy).item())
            ref.append(_single_step(single, opt, x.cuda(), y.cuda()))
            assert rdp.verify_replicas() == []
        assert_equal_runs(losses, ref, rdp.module, single, 1e-4)
