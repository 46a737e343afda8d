"""``ReplicatedDataParallel``: data parallel in one process, for your own training loop.

What ``nn.DataParallel`` would be if it kept its replicas: the module is replicated **once** onto every
device, each replica keeps its own optimizer, gradients are averaged by bucketed all-reduces that
overlap the backward pass, and every replica steps on the identical average — so the replicas stay
bit-identical without ever broadcasting parameters.  Optional CUDA graphs replay each replica's whole
step with a few launches, so one Python process can keep many GPUs busy.  The same class runs across
processes (one or several replicas each) over a :class:`~gpucomm.ProcessGroupCommunicator`.

A training loop::

    model = ReplicatedDataParallel(net.to("cuda:0"), ["cuda:0", "cuda:1"], torch.optim.AdamW, lr=3e-4)
    for x, y in loader:
        out = model(x)                                  # x split by dim 0; one output per replica
        loss = model.loss(F.cross_entropy, out, y)      # the global batch's loss
        loss.backward()                                 # gradients averaged during backward
        model.optimizer.step()                          # every replica's optimizer
        model.optimizer.zero_grad()

:class:`ReplicatedDataParallel`'s docstring gives every rule; ``docs/parallel.md`` the migration from
DataParallel.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import torch
from torch import nn

from gpucomm._validate import fail_type, fail_value
from gpucomm.communicator import Communicator, LocalCommunicator
from gpucomm.parallel import graphs as _graphs
from gpucomm.parallel.batch import split, split_call, split_like, to_device
from gpucomm.parallel.buckets import MiB
from gpucomm.parallel.buffers import BufferSync, module_tensors
from gpucomm.parallel.checks import (
    check_callable,
    check_communicator,
    check_devices,
    check_flag,
    check_module,
    check_optimizer,
    check_optimizer_result,
    check_output_device,
    check_positive,
    names,
)
from gpucomm.parallel.loss import REDUCTIONS, check_loss, combine, weighted_sum, weights
from gpucomm.parallel.optimizer import ReplicatedOptimizer
from gpucomm.parallel.outputs import PerReplica
from gpucomm.parallel.reducer import GradientReducer
from gpucomm.parallel.threads import CallerState, ReplicaThreads

__all__ = ["ReplicatedDataParallel"]

_NULL = contextlib.nullcontext()


def _replicate(module: nn.Module, device: torch.device) -> nn.Module:
    """A deep copy of ``module`` on ``device``: parameters and buffers copied straight there (no second copy on
    the source device); tied parameters stay tied; gradients are not copied."""
    memo: dict[int, Any] = {}
    for p in module.parameters():
        if type(p) is nn.Parameter:
            memo[id(p)] = nn.Parameter(p.detach().to(device, copy=True), requires_grad=p.requires_grad)
    for b in module.buffers():
        if type(b) is torch.Tensor:
            memo[id(b)] = b.detach().to(device, copy=True)
    return copy.deepcopy(module, memo).to(device)


def _call_args(inputs: Any) -> tuple[tuple, dict]:
    """train_step's calling convention: a tuple is positional arguments, a dict keyword arguments."""
    if isinstance(inputs, tuple) and not hasattr(inputs, "_fields"):
        return inputs, {}
    if isinstance(inputs, dict):
        return (), inputs
    return (inputs,), {}


def _loss_of(loss_fn: Callable[..., Any], model: nn.Module, inputs: Any, targets: Any) -> torch.Tensor:
    args, kwargs = _call_args(inputs)
    out = model(*args, **kwargs)
    return check_loss(loss_fn(out) if targets is None else loss_fn(out, targets), 0)


class ReplicatedDataParallel:
    """Data parallel over ``devices`` in this process: persistent replicas, averaged gradients, one optimizer each.

    Args:
        module: the model, on ``devices[0]``; it becomes replica 0 (``self.module``), the others are copies.
        devices: this process's devices, one replica each (``["cuda:0", "cuda:1"]``; repeats allowed, e.g.
            ``["cpu"] * 3`` to try it on a CPU).
        optimizer: an optimizer class (called ``optimizer(params, **optimizer_kwargs)``) or a factory
            ``params -> Optimizer`` (for parameter groups), called once per replica with that replica's
            parameters in ``module.parameters()`` order.  Never an instance: each replica needs its own.
        communicator: None (this process only), or a :class:`~gpucomm.ProcessGroupCommunicator` holding
            ``devices[0]`` to train across processes (started by ``gpucomm.dist.launch`` or torchrun): each
            process then passes its own devices and its own part of the global batch.
        graphs: capture each replica's whole step in CUDA graphs, replayed by :meth:`train_step` (CUDA only;
            static shapes; the optimizer must be capturable, e.g. ``torch.optim.AdamW(..., capturable=True)``).
        output_device: gather every forward's outputs onto this device (as DataParallel does) instead of
            returning them per replica.
        broadcast_buffers: keep every replica's buffers equal to replica 0's (:mod:`gpucomm.parallel.buffers`).
        bucket_cap_mb, first_bucket_mb: gradient bucket sizes in MiB (DDP's 25 and 1).
        threads: run the replicas' forwards in one persistent thread each (default: with several replicas).
        **optimizer_kwargs: the optimizer's arguments (``lr=3e-4, weight_decay=0.1``).

    **Semantics** (each one tested against one-device training of the same model, seed and batch):

    * ``model(*args, **kwargs)`` splits every tensor argument by dim 0 (tuples, lists, dicts nested
      freely; other values go to every replica) into contiguous shards in order, sizes differing by at
      most one (:mod:`gpucomm.parallel.batch`), and returns a :class:`PerReplica`: each output stays on
      its replica's device unless ``output_device`` is given or you call ``.gather()``.
    * :meth:`loss` computes the global batch's loss from each replica's, weighting each by its share,
      so uneven shards give exactly the one-device mean (:mod:`gpucomm.parallel.loss`).  A loss computed
      from gathered outputs is correct too.  Backward that loss (``loss.backward()`` or
      ``scaler.scale(loss).backward()``): gradients are averaged during the backward pass.
    * :attr:`optimizer` (:class:`ReplicatedOptimizer`) steps every replica's optimizer; LR schedulers and
      ``torch.amp.GradScaler`` take it like any optimizer; :meth:`clip_grad_norm_` clips by the global
      norm exactly as one device does.  :meth:`no_sync` accumulates gradients without communication.
    * :meth:`train`/:meth:`eval`, ``torch.no_grad()``/``inference_mode`` and the caller's
      ``torch.autocast`` reach every replica's forward (also in its thread).
    * :meth:`state_dict`/:meth:`load_state_dict` (and the optimizer's) are the one-device ones, so a
      checkpoint moves between one device, this and DDP (a DDP ``state_dict()``'s ``module.`` prefix is
      accepted).
    """

    def __init__(self, module: nn.Module, devices: Sequence[Any], optimizer: type[torch.optim.Optimizer] |
                 Callable[..., torch.optim.Optimizer], *, communicator: Communicator | None = None,
                 graphs: bool = False, output_device: Any = None, broadcast_buffers: bool = True,
                 bucket_cap_mb: float = 25.0, first_bucket_mb: float = 1.0, threads: bool | None = None,
                 **optimizer_kwargs: Any) -> None:
        # ----- every check first: nothing is built, and the module is untouched, until they pass --------
        self.devices = check_devices(devices)
        check_module(module, self.devices[0])
        check_optimizer(optimizer, optimizer_kwargs)
        check_communicator(communicator, self.devices)
        check_flag(graphs, "graphs")
        check_flag(broadcast_buffers, "broadcast_buffers")
        check_flag(threads, "threads", optional=True)
        check_positive(bucket_cap_mb, "bucket_cap_mb")
        check_positive(first_bucket_mb, "first_bucket_mb")
        self.output_device = check_output_device(output_device, self.devices)
        if graphs:
            if (reason := _graphs.unavailable(self.devices)) is not None:
                raise fail_value("graphs", "CUDA devices for graphs=True", reason.split(", but got ")[-1],
                                 "use CUDA devices, or graphs=False")
            if self.output_device is not None:
                raise fail_value("output_device", "None with graphs=True (train_step computes the loss per "
                                 "replica)", str(self.output_device), "leave output_device out")
        if communicator is None and len(self.devices) == 1 and torch.distributed.is_available() \
                and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            warnings.warn("ReplicatedDataParallel: torch.distributed is initialized but no communicator was given, "
                          "so this process trains alone; pass communicator=ProcessGroupCommunicator(device=...) to "
                          "train across processes", stacklevel=2)
        self.graphs = graphs
        self.module = module
        self._local, self._group = self._communicators(communicator)
        self._k = len(self.devices)
        self._world = self._group.world_size if self._group is not None else 1
        self.n_total = self._k * self._world

        # ----- replica 0's optimizer first: a bad factory fails before any copy is made --------------------
        if self._group is not None:
            self._sync_from_rank0(module)
        build = partial(optimizer, **optimizer_kwargs) if optimizer_kwargs else optimizer
        optimizers = [build(list(module.parameters()))]
        structure = check_optimizer_result(optimizers[0], list(module.parameters()), 0)
        if graphs and any(g.get("capturable") is False for g in optimizers[0].param_groups):
            raise fail_value("optimizer", "a capturable optimizer with graphs=True (its step counter on the "
                             "device)", f"{type(optimizers[0]).__name__} with capturable=False",
                             "pass capturable=True (e.g. torch.optim.AdamW, lr=..., fused=True, capturable=True)")
        self.replicas: list[nn.Module] = [module] + [_replicate(module, d) for d in self.devices[1:]]
        for r, replica in enumerate(self.replicas[1:], start=1):
            optimizers.append(build(list(replica.parameters())))
            if check_optimizer_result(optimizers[r], list(replica.parameters()), r) != structure:
                raise fail_value("optimizer", "the same parameter groups for every replica", "different groups "
                                 f"for replica {r}", "make the factory depend only on the parameters it is given")
        self._trained = [[p for p in m.parameters() if p.requires_grad] for m in self.replicas]
        self._param_names = names(module, self._trained[0])

        # ----- communication, threads, the optimizer the user sees --------------------------------------
        self._reducer: GradientReducer | None = None
        if self.n_total > 1:
            caps = (None, None) if graphs else (int(bucket_cap_mb * MiB), int(first_bucket_mb * MiB))
            self._reducer = GradientReducer(self._trained, self._local, self._group, cap_bytes=caps[0],
                                            first_cap_bytes=caps[1], overlap=not graphs,
                                            phase=lambda name: self.host_phase(name))
        self._buffers = BufferSync(self.replicas, self._local, self._group) \
            if broadcast_buffers and self.n_total > 1 and module_tensors(module) else None
        self._buffers_dirty = False
        use_threads = (threads if threads is not None else True) and len(self.devices) > 1 and not graphs
        self._threads = ReplicaThreads(len(self.devices)) if use_threads else None
        self.optimizer = ReplicatedOptimizer(optimizers, step_fn=self._step_replicas, zero_grad_fn=self._zero_grad)
        self._no_sync = False
        self._step_graphs: _graphs.StepGraphs | None = None
        self._graph_key: tuple | None = None
        self._ones: tuple[float, ...] = ()
        self._graph_steps = 0
        self._in_graph_step = False
        self.train(module.training)

    # ----- construction helpers ---------------------------------------------------------------------
    def _communicators(self, given: Communicator | None) -> tuple[Communicator | None, Communicator | None]:
        """(across this process's replicas, across processes); either may be None."""
        if given is not None and given.world_size > 1:
            local = LocalCommunicator(self.devices) if len(self.devices) > 1 else None
            return local, given
        if given is not None:
            return given, None
        return (LocalCommunicator(self.devices) if len(self.devices) > 1 else None), None

    @torch.no_grad()
    def _sync_from_rank0(self, module: nn.Module) -> None:
        """Across processes, start from rank 0's parameters and buffers (DDP does the same)."""
        for t in [p.data for p in module.parameters()] + module_tensors(module):
            self._group.broadcast([t], 0)

    def __repr__(self) -> str:
        where = f"{self._world} processes x " if self._world > 1 else ""
        return (f"ReplicatedDataParallel({type(self.module).__name__}, {where}{len(self.devices)} replicas on "
                f"{[str(d) for d in self.devices]}, graphs={self.graphs})")

    # ----- instrumentation --------------------------------------------------------------------------
    def host_phase(self, name: str) -> contextlib.AbstractContextManager:
        """A context manager around each host phase of a step ("forward", "loss", "backward", "all_reduce",
        "optimizer"; with graphs "load", "forward_backward", "all_reduce", "optimizer", or for one replica "load",
        "replay"): none by default.
        Assign a function to time them (``gpucomm train`` does); it may be called from replica threads."""
        return _NULL

    @property
    def record_comm_time(self) -> bool:
        """Record each reducing backward's all-reduce time, for :meth:`take_comm_ms` (off by default)."""
        return bool(self._reducer and self._reducer.record_comm_time)

    @record_comm_time.setter
    def record_comm_time(self, value: bool) -> None:
        if self._reducer is not None:
            self._reducer.record_comm_time = bool(value)

    def take_comm_ms(self) -> list[float]:
        """The all-reduce times (ms) recorded since the last call (CUDA: GPU time on the first device's comm
        stream, read after a synchronize; CPU: host time).  Eager only; empty without communication."""
        return self._reducer.take_comm_ms() if self._reducer is not None else []

    # ----- modes ------------------------------------------------------------------------------------
    @property
    def training(self) -> bool:
        return self.module.training

    def train(self, mode: bool = True) -> ReplicatedDataParallel:
        """Every replica to training (or evaluation) mode; returns self."""
        check_flag(mode, "mode")
        for m in self.replicas:
            m.train(mode)
        return self

    def eval(self) -> ReplicatedDataParallel:
        return self.train(False)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside, forwards prepare backward passes that only accumulate gradients locally (no all-reduce); the
        first backward of a forward outside averages everything accumulated (DDP's ``no_sync``)."""
        before, self._no_sync = self._no_sync, True
        try:
            yield
        finally:
            self._no_sync = before

    # ----- forward and loss -------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run every replica on its shard of the batch; a :class:`PerReplica` (or the gathered outputs)."""
        grad = torch.is_grad_enabled()
        if self.graphs and grad:
            raise RuntimeError("forward: with graphs=True a training forward runs inside the captured step: call "
                               "train_step(inputs, targets, loss_fn=...), or run inference under torch.no_grad()")
        sizes, shards = split_call(args, kwargs, len(self.replicas))
        if self._buffers is not None and self._buffers_dirty:
            self._sync_buffers()
        if grad and self._reducer is not None:
            self._reducer.prepare_for_backward(sync=not self._no_sync)
        if self._threads is None:
            outputs = [self._forward_one(r, shards[r], None) for r in range(len(self.replicas))]
        else:
            streams = {d: torch.cuda.current_stream(d) for d in dict.fromkeys(self.devices)} \
                if self.devices[0].type == "cuda" else None
            outputs = self._threads.map(lambda r: self._forward_one(r, shards[r], streams))
        if self.training and self._buffers is not None:
            self._buffers_dirty = True
        per = PerReplica(outputs, self.devices, sizes, grad_scale=self._k)
        return per.gather(self.output_device) if self.output_device is not None else per

    def _forward_one(self, r: int, shard: tuple[tuple, dict], streams: dict | None) -> Any:
        device = self.devices[r]
        with contextlib.ExitStack() as stack:
            if device.type == "cuda":
                stack.enter_context(torch.cuda.device(device))
                if streams is not None:
                    stack.enter_context(torch.cuda.stream(streams[device]))
            args, kwargs = to_device(shard, device)
            return self.replicas[r](*args, **kwargs)

    def loss(self, loss_fn: Callable[..., torch.Tensor], outputs: PerReplica, targets: Any = None, *,
             reduction: str = "mean") -> torch.Tensor:
        """The global batch's loss, on the first device: ``loss_fn(output_i, targets_i)`` per replica (or
        ``loss_fn(output_i)`` without targets), combined by ``reduction`` — "mean" (the loss is a mean over the
        samples it is given: replicas weighted by their share) or "sum" (:mod:`gpucomm.parallel.loss`).
        ``targets`` is split exactly as the forward's inputs were."""
        check_callable(loss_fn, "loss_fn", "torch.nn.functional.cross_entropy")
        if not isinstance(outputs, PerReplica):
            raise fail_type("outputs", "the PerReplica that model(...) returned", outputs,
                            "pass model(...)'s result; with output_device set, compute the loss on the gathered "
                            "outputs directly")
        if reduction not in REDUCTIONS:
            raise fail_value("reduction", f"one of {list(REDUCTIONS)}", repr(reduction),
                             "say how loss_fn reduces over samples")
        n = len(outputs)
        shards = [None] * n if targets is None else split_like(targets, list(outputs.sizes)) if n > 1 else [targets]
        losses = []
        for r, (out, target, device) in enumerate(zip(outputs, shards, outputs.devices, strict=True)):
            with torch.cuda.device(device) if device.type == "cuda" else _NULL:
                value = loss_fn(out) if targets is None else loss_fn(out, to_device(target, device))
            losses.append(check_loss(value, r))
        scale = self._k if reduction == "mean" else self.n_total
        return combine(losses, outputs.sizes, reduction, scale, outputs.devices[0])

    # ----- gradients and the step -------------------------------------------------------------------
    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                        foreach: bool | None = None) -> torch.Tensor:
        """Clip every replica's gradients by their global norm — the norm one device computes, since after the
        all-reduce every replica holds the same gradients — and return it (replica 0's, a device tensor)."""
        check_positive(max_norm, "max_norm")
        norms = [torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type, error_if_nonfinite, foreach)
                 for ps in self._trained]
        return norms[0]

    def _step_replicas(self) -> None:
        """The ReplicatedOptimizer's step: every replica's optimizer (or, with graphs, the captured step's)."""
        if self.graphs:
            if not self._in_graph_step or self._step_graphs is None:
                raise RuntimeError("optimizer.step(): with graphs=True the optimizer step is part of the captured "
                                   "step; call train_step(inputs, targets, loss_fn=...) instead")
            g = self._step_graphs
            phase = "optimizer" if g.phases > 1 else "replay"  # one replica: the whole step is one graph
            for r in range(len(self.replicas)):
                with self.host_phase(phase):
                    g.replay(g.phases - 1, replica=r)
            return
        if self._reducer is not None and not self._reducer.any_grad():
            return  # every gradient is None, as after zero_grad on one device: the optimizers would do nothing
        for opt in self.optimizer.optimizers:
            opt.step()
        if self._buffers is not None and self._buffers_dirty:
            self._sync_buffers()

    def _zero_grad(self, set_to_none: bool) -> None:
        if self.graphs:
            return  # the captured step zeroes its gradients itself
        if self._reducer is not None:
            self._reducer.zero_grad(set_to_none)
        else:
            for opt in self.optimizer.optimizers:
                opt.zero_grad(set_to_none)

    def _sync_buffers(self) -> None:
        with torch.no_grad():
            self._buffers()
        self._buffers_dirty = False

    # ----- one whole step ---------------------------------------------------------------------------
    def train_step(self, inputs: Any, targets: Any = None, *, loss_fn: Callable[..., torch.Tensor],
                   max_norm: float | None = None, reduction: str = "mean") -> torch.Tensor:
        """Forward, loss, backward, (clipping,) optimizer step and zero_grad of one batch; the loss (detached).

        ``inputs`` is the model's argument (a tuple: its positional arguments; a dict: its keyword arguments).
        Forward and loss run under the caller's autocast, backward and the step outside it (PyTorch's AMP
        recipe).  With ``graphs=True`` the first call captures the step and every call replays it: the batch's
        shapes, ``loss_fn``, ``max_norm``, ``reduction`` and the autocast state must then stay the same.
        """
        if self.graphs:
            if self._step_graphs is None:  # once captured, the arguments are compared with the capture's instead
                self._check_step(loss_fn, max_norm, reduction)
            return self._graph_step(inputs, targets, loss_fn, max_norm, reduction)
        self._check_step(loss_fn, max_norm, reduction)
        state = CallerState.capture()
        args, kwargs = _call_args(inputs)
        with self.host_phase("forward"):
            out = self.forward(*args, **kwargs)
        with self.host_phase("loss"):
            if self.output_device is not None:
                value = loss_fn(out) if targets is None else loss_fn(out, to_device(targets, self.output_device))
                loss = check_loss(value, 0)
            else:
                loss = self.loss(loss_fn, out, targets, reduction=reduction)
        # The outputs must not outlive the loss: a plain loop's ``loss_fn(model(x), y)`` frees them there, and what
        # backward needs the loss's graph keeps.  Held across backward, they would add a whole output tensor to the
        # peak (a GPT's bf16 logits: 1.5 GiB at 16 x 1024 x 50304).
        del out
        with state.without_autocast():
            with self.host_phase("backward"):
                loss.backward()
            with self.host_phase("optimizer"):
                if max_norm is not None:
                    self.clip_grad_norm_(max_norm)
                self.optimizer.step()
                self.optimizer.zero_grad()
        return loss.detach()

    def capture(self, inputs: Any, targets: Any = None, *, loss_fn: Callable[..., torch.Tensor],
                max_norm: float | None = None, reduction: str = "mean") -> None:
        """With ``graphs=True``: warm up and capture the step of :meth:`train_step` now, on this batch, leaving
        no trace (the warm-up is undone), so that the first ``train_step`` is already a replay.  Call it under
        the autocast ``train_step`` will run in.  (``train_step`` captures by itself when this was not called.)
        """
        self._check_step(loss_fn, max_norm, reduction)
        if not self.graphs:
            raise RuntimeError("capture: there is nothing to capture with graphs=False; build the wrapper with "
                               "graphs=True (CUDA devices, a capturable optimizer)")
        self._graph_batch(inputs, targets, loss_fn, max_norm, reduction)

    def _check_step(self, loss_fn: Any, max_norm: Any, reduction: Any) -> None:
        check_callable(loss_fn, "loss_fn", "torch.nn.functional.cross_entropy")
        check_positive(max_norm, "max_norm", optional=True)
        if reduction not in REDUCTIONS:
            raise fail_value("reduction", f"one of {list(REDUCTIONS)}", repr(reduction),
                             "say how loss_fn reduces over samples")
        self._check_grad_enabled()

    @staticmethod
    def _check_grad_enabled() -> None:
        if not torch.is_grad_enabled():
            raise RuntimeError("train_step: gradients are disabled here (torch.no_grad or inference_mode); call it "
                               "outside, or use model(...) for inference")

    def _graph_batch(self, inputs: Any, targets: Any, loss_fn: Callable[..., Any], max_norm: float | None,
                     reduction: str) -> None:
        """Capture on this batch if nothing is captured yet, else check that the step is the one captured."""
        key = (loss_fn, max_norm, reduction, CallerState.capture())
        if self._step_graphs is None:
            n = len(self.replicas)
            sizes, in_shards = split(inputs, n, "inputs")
            t_shards = [None] * n if targets is None else split_like(targets, sizes) if n > 1 else [targets]
            self._capture(key, sizes, list(zip(in_shards, t_shards, strict=True)))
        elif key != self._graph_key:
            what = ["loss_fn", "max_norm", "reduction", "autocast/grad state"]
            changed = [w for w, a, b in zip(what, key, self._graph_key, strict=True) if a != b]
            raise ValueError(f"train_step: expected the {', '.join(changed)} the CUDA graph was captured with, but "
                             f"got another; a graph replays what it captured: keep them fixed, or use graphs=False")

    def _graph_step(self, inputs: Any, targets: Any, loss_fn: Callable[..., Any], max_norm: float | None,
                    reduction: str) -> torch.Tensor:
        """One replayed step.  Its host work is what cannot be decided at capture: the key's comparison (the
        caller's autocast may change between calls), the batch's check and copies (:class:`~gpucomm.parallel.graphs.
        BatchLoader`), the replays and the all-reduce, the optimizer's hyperparameters, and the loss's sum."""
        self._check_grad_enabled()
        if self._no_sync:
            raise RuntimeError("no_sync: a captured step always all-reduces (its graphs are fixed); accumulate "
                               "over a larger batch, or use graphs=False for no_sync accumulation")
        self._graph_batch(inputs, targets, loss_fn, max_norm, reduction)
        g = self._step_graphs
        with self.host_phase("load"):
            g.load((inputs, targets), self._graph_steps)
        if g.phases == 3:
            for r in range(len(self.replicas)):
                with self.host_phase("forward_backward"):
                    g.replay(0, replica=r)
            with self.host_phase("all_reduce"):
                g.replay(1)
        self._in_graph_step = True
        try:
            self.optimizer.step()
        finally:
            self._in_graph_step = False
        self._graph_steps += 1
        terms = g.weighted_losses()  # each replica's loss times its weight, computed by its graph
        loss = weighted_sum(terms, self._ones, self.devices[0])  # the adds only, in combine's order: its bits
        return loss.clone() if loss is terms[0] else loss

    def _capture(self, key: tuple, sizes: list[int], shards: list[tuple[Any, Any]]) -> None:
        loss_fn, max_norm, reduction, state = key
        self.optimizer.use_device_lr()
        scale = self._k if reduction == "mean" else self.n_total
        total = sum(sizes)
        factors = [scale * b / total if reduction == "mean" else float(scale) for b in sizes]
        reducer = self._reducer
        steps = [_graphs.ReplicaStep(model=m, optimizer=o, loss_of=partial(_loss_of, loss_fn), device=d, state=state,
                                     example=shard, factor=f, weight=w, params=ps, max_norm=max_norm,
                                     grads=reducer.buffers[r] if reducer is not None else None,
                                     average=self.n_total)
                 for r, (m, o, d, shard, f, w, ps) in enumerate(zip(self.replicas, self.optimizer.optimizers,
                                                                    self.devices, shards, factors,
                                                                    weights(sizes, reduction), self._trained,
                                                                    strict=True))]
        between = self._between if reducer is not None else None
        g = _graphs.StepGraphs(steps, between=between, param_names=self._param_names)
        g.prepare()
        self._step_graphs, self._graph_key, self._ones = g, key, (1.0,) * len(steps)

    def _between(self) -> None:
        """Graphs, between the captured segments: the gradient all-reduce and the buffer copies."""
        self._reducer.reduce_all()
        if self._buffers is not None:
            self._buffers()

    # ----- checkpoints ------------------------------------------------------------------------------
    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Replica 0's (the module's) state dict: exactly what the module on one device saves."""
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> Any:
        """Load a one-device state dict (or a DDP one, ``module.``-prefixed) into every replica, in place.

        Keys and shapes are checked before any replica changes.
        """
        if not isinstance(state_dict, dict):
            raise fail_type("state_dict", "a dict (a module's state_dict())", state_dict)
        own = self.module.state_dict()
        keys = list(state_dict)
        if keys and all(k.startswith("module.") for k in keys) and not any(k.startswith("module.") for k in own):
            state_dict = {k[len("module."):]: v for k, v in state_dict.items()}
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise fail_value("state_dict", "the module's keys", f"missing {missing[:3]} and unexpected "
                             f"{unexpected[:3]}" + (" (and more)" if len(missing) > 3 or len(unexpected) > 3 else ""),
                             "load a checkpoint of the same model, or pass strict=False")
        for k, v in state_dict.items():
            if k in own and isinstance(v, torch.Tensor) and v.shape != own[k].shape:
                raise fail_value(f"state_dict[{k!r}]", f"shape {list(own[k].shape)}", str(list(v.shape)),
                                 "load a checkpoint of the same model")
        results = [m.load_state_dict(state_dict, strict=strict) for m in self.replicas]
        return results[0]

    def verify_replicas(self) -> list[str]:
        """Every parameter and buffer in which a replica differs from replica 0 (rank 0's, across processes) by
        even one bit; [] when they are identical, as they must be after every step."""
        reference = self.module.state_dict()
        problems = []
        for r, model in enumerate(self.replicas[1:], start=1):
            for name, t in model.state_dict().items():
                if not torch.equal(t.cpu(), reference[name].cpu()):
                    problems.append(f"replica {r} ({self.devices[r]}) differs from replica 0 in {name!r}")
        if self._group is not None:
            problems += self._cross_process_differences(reference)
        return problems

    def _cross_process_differences(self, reference: dict[str, torch.Tensor]) -> list[str]:
        names_, mine = zip(*reference.items(), strict=True)
        # compared as bytes: bit-identity is the claim (and NaN == NaN bitwise)
        mine = [t.detach().contiguous().reshape(-1).view(torch.uint8) for t in mine]
        flat = torch.cat(mine)
        theirs = flat.clone()
        self._group.broadcast([theirs], root=0)
        if torch.equal(flat, theirs):
            return []
        offset, problems = 0, []
        rank = self._group.rank
        for name, t in zip(names_, mine, strict=True):
            n = t.numel()
            if not torch.equal(flat[offset:offset + n], theirs[offset:offset + n]):
                problems.append(f"rank {rank}'s replicas differ from rank 0's in {name!r}")
            offset += n
        return problems

    def close(self) -> None:
        """Remove the gradient hooks and stop the replica threads (the replicas stay usable as plain modules)."""
        if self._reducer is not None:
            self._reducer.close()
        if self._threads is not None:
            self._threads.close()
            self._threads = None
        self._step_graphs = None
