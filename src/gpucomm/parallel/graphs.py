"""CUDA graphs for a whole training step (``ReplicatedDataParallel(..., graphs=True)``).

**Why.**  One Python process that drives several GPUs must launch every kernel of every replica.
Eager, a GPT-124M step (16x1024, bf16) costs about half its GPU time in host time on an H200, so one
process keeps about two GPUs busy.  A step captured in a CUDA graph is replayed with one launch, and
its host cost no longer grows with the kernel count.

**Which mechanism, and why.**  Plain CUDA graphs (``torch.cuda.CUDAGraph`` captured with
``torch.cuda.graph``), not ``torch.compile(mode="reduce-overhead")`` and not
``torch.cuda.make_graphed_callables``:

* no compiler: plain capture works on torch 2.4+ with no Triton/Inductor, costs no compile time, and
  replays the *same kernels* as the eager step, so graph losses compare with eager ones directly;
* the whole step is captured, the optimizer included (a ``capturable`` optimizer keeps its step
  counter on the device), where ``make_graphed_callables`` graphs forward and backward only;
* we own the static buffers (the batch, the loss, the gradient buckets) and the capture points, which
  several replicas need: their gradient all-reduce sits between two captured segments (below).

**How** (:class:`StepGraphs`):

1. *warm up*: the exact step runs eagerly ``warmup`` times on the first batch on a side stream, as
   torch's documentation prescribes (cuBLAS workspaces, autograd's lazy state and the optimizer's
   state are made outside the capture).  Warm-up and capture run on one side stream per device, the
   same for every capture in the process (:func:`graph_stream`): cuBLAS keeps a workspace for every
   stream it has run on until the process ends, so a fresh stream per capture would leave one more
   behind each time a wrapper captures;
2. *restore*: parameters, buffers and optimizer state are written back in place (same addresses), so
   the graphed run trains from the state it had before the first step — warm-up leaves no trace in
   the trajectory, and the first step is a replay like every other;
3. *capture*: each replica's step is captured on its own device, on that device's side stream,
   into a memory pool shared by the graphs of that device (they replay one after another, in capture
   order, so they may share memory);
4. *replay*: each step copies the batch into the static input buffers — checked against the captured
   shapes once, then one asynchronous ``copy_`` per tensor per replica (:class:`BatchLoader`) — and
   replays; the loss is read from the static loss tensor on the device (never synchronised by the
   step).  Everything that cannot change once captured is decided at capture, so a replayed step's
   host work does not grow with the model: no loop over parameters, no allocation but the loss's.

**Gradient all-reduce: issued between captured segments, not captured.**  With several replicas each
has a forward+backward graph (gradients land in its flat gradient buffer, one per dtype) and an
optimizer graph (average the buffer, clip, step, zero it); between them the host runs ONE *prepared*
all-reduce per dtype over the replicas' buffers.  Reasons: a CUDA graph is captured on one device's
stream, while the collective spans every replica's device and, across processes, other processes
(over gloo it is not even GPU work); the prepared call keeps its host cost small and works for every
Communicator.  The price: with graphs the all-reduce no longer overlaps backward.  One replica needs
no collective and captures its whole step in one graph.

**What cannot be captured** raises :class:`GraphCaptureError` naming the constraint and the fix: CPU
devices, a step that synchronises with the host (``.item()``, ``.cpu()``, ``print(tensor)``,
data-dependent shapes such as ``nonzero()`` or boolean-mask indexing), a batch whose shapes differ from
the captured ones (pad, or drop the last batch), a parameter that gets no gradient in the step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from gpucomm.parallel.batch import map_tensors, tensors
from gpucomm.parallel.threads import CallerState

__all__ = [
    "WARMUP_ITERATIONS",
    "BatchLoader",
    "GraphCaptureError",
    "ReplicaStep",
    "StaticBatch",
    "StepGraphs",
    "capture",
    "capture_reason",
    "graph_stream",
    "unavailable",
]

WARMUP_ITERATIONS = 3
"""Eager iterations before capture (torch's whole-network example uses 3)."""

_FIX = "or run eagerly (graphs=False)"


class GraphCaptureError(RuntimeError):
    """A step that cannot be captured in (or replayed from) a CUDA graph; the message names the reason and fix."""


def unavailable(devices: Sequence[torch.device]) -> str | None:
    """Why CUDA graphs cannot run on ``devices``, or None when they can."""
    others = [str(d) for d in devices if d.type != "cuda"]
    if others:
        return f"CUDA graphs need CUDA devices, but got {', '.join(dict.fromkeys(others))}"
    if not torch.cuda.is_available():
        return "CUDA graphs need CUDA, which this torch build or machine does not have"
    return None


# ----- static inputs ---------------------------------------------------------------------------------
class StaticBatch:
    """One replica's ``(inputs, targets)`` in fixed device buffers, filled with ``example``: what a graph reads.

    Args:
        example: a shard with the shapes every step will have (tensors, or tuples/lists/dicts of them).
        device: the replica's device.
    """

    def __init__(self, example: tuple[Any, Any], device: torch.device) -> None:
        self.data = map_tensors(tuple(example), lambda t: torch.empty_like(t, device=device).copy_(t))
        self.buffers = tensors(self.data)
        """The buffers, in :func:`~gpucomm.parallel.batch.tensors` order."""

    @property
    def inputs(self) -> Any:
        return self.data[0]

    @property
    def targets(self) -> Any:
        return self.data[1]


class BatchLoader:
    """A step's global batch into every replica's :class:`StaticBatch`: checked, then copied shard by shard.

    The batch is ``(inputs, targets)`` as the step receives it, before any split.  Its tensors must have the
    shapes and dtypes of the batch the graphs were captured with — the static buffers' — so one comparison
    checks the batch, every shard follows (replica ``r`` gets samples ``sum(sizes[:r])`` onwards, as
    :func:`~gpucomm.parallel.batch.split` splits), and each tensor is copied with one asynchronous ``copy_``
    per replica, from pinned or device memory.

    Args:
        batches: every replica's static buffers, replica 0 first.
    """

    def __init__(self, batches: Sequence[StaticBatch]) -> None:
        per_replica = [b.buffers for b in batches]
        self.sizes = [int(bufs[0].shape[0]) for bufs in per_replica]
        total = sum(self.sizes)
        self.signature = [(torch.Size([total, *t.shape[1:]]), t.dtype) for t in per_replica[0]]
        """Every tensor's (shape, dtype) in the global batch, in order."""
        self._targets = list(zip(*per_replica, strict=True))  # per tensor: its buffer on every replica
        self._whole = len(per_replica) == 1

    def __call__(self, batch: tuple[Any, Any], step: int) -> None:
        """Copy ``batch`` into the buffers.

        Raises:
            GraphCaptureError: its structure, shapes or dtypes differ from the captured ones (nothing copied).
        """
        leaves = tensors(batch)
        if [(t.shape, t.dtype) for t in leaves] != self.signature:
            raise self._mismatch(leaves, step)
        if self._whole:
            for t, (dst,) in zip(leaves, self._targets, strict=True):
                dst.copy_(t, non_blocking=True)
            return
        sizes = self.sizes
        for t, dsts in zip(leaves, self._targets, strict=True):
            for dst, part in zip(dsts, t.split_with_sizes(sizes), strict=True):
                dst.copy_(part, non_blocking=True)

    def _mismatch(self, leaves: list[torch.Tensor], step: int) -> GraphCaptureError:
        if len(leaves) != len(self.signature):
            return GraphCaptureError(f"dynamic inputs: step {step}'s batch has {len(leaves)} tensor(s), the graph "
                                     f"was captured with {len(self.signature)}; pass the same structure every step, "
                                     f"{_FIX}")
        i, src, (shape, dtype) = next((i, t, sig) for i, (t, sig) in enumerate(zip(leaves, self.signature, strict=True))
                                      if (t.shape, t.dtype) != sig)
        return GraphCaptureError(
            f"dynamic shapes: step {step}'s batch tensor {i} is {list(src.shape)} {src.dtype}, but the graph was "
            f"captured with {list(shape)} {dtype}; a CUDA graph replays fixed shapes: give every step the same "
            f"shapes (pad, or drop the uneven last batch), {_FIX}")


# ----- capture -----------------------------------------------------------------------------------------
_STREAMS: dict[torch.device, Any] = {}


def graph_stream(device: torch.device) -> Any:
    """The side stream every warm-up and capture on CUDA ``device`` runs on, made once per process (module
    notes: cuBLAS workspaces are kept per stream).  Work on it is ordered against the caller's stream by
    ``wait_stream`` on entry and exit, so captures of several wrappers never overlap on it."""
    stream = _STREAMS.get(device)
    if stream is None:
        stream = _STREAMS[device] = torch.cuda.Stream(device)
    return stream


_REASONS: tuple[tuple[str, str], ...] = (
    ("operation not permitted when stream is capturing",
     "the step synchronises the host with the GPU (e.g. .item(), .cpu(), print(tensor), or a data-dependent "
     "shape such as nonzero() or boolean-mask indexing), which a CUDA graph cannot contain"),
    ("operation would make the legacy stream depend on a capturing blocking stream",
     "the step uses the legacy default stream (e.g. a synchronous copy or a cudaMemcpy from the host), "
     "which a CUDA graph cannot contain"),
    ("current_seed during CUDA graph capture",
     "the step reads the random seed on the host during capture"),
    ("operation not supported when stream is capturing",
     "the step calls a CUDA operation that stream capture does not support"),
    ("capture_invalidated", "the capture was invalidated by an operation outside the graph's stream"),
    ("StreamCaptureInvalidated", "the capture was invalidated by an operation outside the graph's stream"),
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo.extend((e.__cause__, e.__context__))


def capture_reason(exc: BaseException) -> str:
    """Why a capture failed, in words, from ``exc`` and the exceptions it was raised from or during.

    The most specific known cause anywhere in the chain wins (torch's ``capture_end`` often replaces the
    first error with a generic "capture invalidated" one); torch's own first line is kept after it.
    """
    errors = list(_chain(exc))
    for pattern, reason in _REASONS:
        for e in errors:
            if pattern.lower() in str(e).lower():
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                return f"{reason} (torch: {first})"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"capture failed with {type(exc).__name__}: {first}"


def capture(fn: Callable[[], None], *, device: torch.device, stream: Any, pool: Any, what: str) -> Any:
    """Capture ``fn()`` on ``device`` (on ``stream``, into ``pool``) and return the graph (``.replay()``).

    ``fn`` is recorded, not run: its kernels run at the first replay.

    Raises:
        GraphCaptureError: ``fn`` cannot be captured; the message names ``what`` and the reason.
    """
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.device(device), torch.cuda.graph(graph, pool=pool, stream=stream):
            fn()
    except Exception as exc:
        raise GraphCaptureError(f"{what} cannot be captured in a CUDA graph: {capture_reason(exc)}; remove it "
                                f"from the step, {_FIX}") from exc
    return graph


# ----- one replica's step ------------------------------------------------------------------------------
class ReplicaStep:
    """One replica's step on static buffers, in the segments that are warmed up, captured and replayed.

    Args:
        model: the replica.
        optimizer: its optimizer (capturable).
        loss_of: ``(model, inputs, targets) -> scalar loss`` (the forward and the user's loss).
        device: the replica's device.
        state: the caller's autocast (entered around ``loss_of`` with the weight-cast cache off: cached casts
            would be made once, at capture, from the graph's pool).
        example: a shard with every step's shapes.
        factor: the loss's gradient factor (:mod:`gpucomm.parallel.loss`).
        weight: the replica's weight in the step's loss (its share of the batch for a mean, 1 for a sum):
            the captured step also writes ``loss * weight``, so the host only adds the replicas' terms.
        params: the parameters that require a gradient (clipped, checked for use).
        grads: the flat gradient buffers the parameters' ``.grad`` are views of, or None (one replica):
            gradients are then set to None before backward, which allocates them in the graph's pool.
        average: divide ``grads`` by this before the optimizer step (the all-reduce sums).
        max_norm: clip the gradients to this global 2-norm before the step (None: no clipping).
    """

    def __init__(self, *, model: nn.Module, optimizer: torch.optim.Optimizer,
                 loss_of: Callable[[nn.Module, Any, Any], torch.Tensor], device: torch.device, state: CallerState,
                 example: tuple[Any, Any], factor: float = 1.0, weight: float = 1.0,
                 params: Sequence[torch.Tensor] = (),
                 grads: list[torch.Tensor] | None = None, average: int = 1, max_norm: float | None = None) -> None:
        self.model, self.optimizer, self.loss_of = model, optimizer, loss_of
        self.device, self.state, self.factor, self.weight = device, state, factor, weight
        self.batch = StaticBatch(example, device)
        self.params = list(params)
        self.grads, self.average, self.max_norm = grads, average, max_norm
        self.loss: torch.Tensor | None = None
        """The last step's loss (a detached device scalar; overwritten by the next replay)."""
        self.weighted: torch.Tensor | None = None
        """``loss * weight``, the replica's term of the step's loss (the same kind of buffer)."""

    def forward_backward(self) -> None:
        if self.grads is None:
            self.optimizer.zero_grad(set_to_none=True)
        with contextlib.ExitStack() as stack:
            self.state.enter(stack, cache=False)
            loss = self.loss_of(self.model, self.batch.inputs, self.batch.targets)
        (loss * self.factor if self.factor != 1 else loss).backward()
        self.loss = loss.detach()
        self.weighted = self.loss * self.weight if self.weight != 1 else self.loss

    def optimizer_step(self) -> None:
        if self.grads and self.average != 1:
            torch._foreach_div_(self.grads, self.average)
        if self.max_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_norm)
        self.optimizer.step()
        if self.grads:
            torch._foreach_zero_(self.grads)

    def whole(self) -> None:
        self.forward_backward()
        self.optimizer_step()


class _Snapshot:
    """Parameters, buffers and optimizer state, saved so that warm-up can be undone in place."""

    def __init__(self, modules: Sequence[nn.Module], optimizers: Sequence[torch.optim.Optimizer]) -> None:
        self._saved = [(t, t.detach().clone()) for m in modules for t in m.state_dict().values()
                       if isinstance(t, torch.Tensor)]
        self._optimizers = list(optimizers)
        self._state = [{p: {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in s.items()}
                        for p, s in opt.state.items()} for opt in self._optimizers]

    @torch.no_grad()
    def restore(self) -> None:
        """Copy the saved values back (same storage); optimizer state made by the warm-up is zeroed in place.

        State that existed before (a loaded checkpoint) gets its saved values back; state the warm-up created
        is zeroed: for Adam(W) that *is* the initial state (step 0, zero moments), for SGD's momentum buffer
        the first step then computes the same value.  Tensors keep their addresses, which the graphs read.
        """
        for live, saved in self._saved:
            live.copy_(saved)
        for opt, before in zip(self._optimizers, self._state, strict=True):
            for p, state in opt.state.items():
                old = before.get(p, {})
                for key, value in state.items():
                    if isinstance(value, torch.Tensor):
                        saved = old.get(key)
                        if isinstance(saved, torch.Tensor):
                            value.copy_(saved)
                        else:
                            value.zero_()
                    elif isinstance(value, int | float):
                        state[key] = old.get(key, type(value)(0))


@contextlib.contextmanager
def _hooks_fired(params: Sequence[torch.Tensor]) -> Iterator[list[bool]]:
    """Record which of ``params`` had a gradient accumulated inside the block."""
    fired = [False] * len(params)

    def hook(i: int) -> Callable[[torch.Tensor], None]:
        def mark(_p: torch.Tensor) -> None:
            fired[i] = True
        return mark

    handles = [p.register_post_accumulate_grad_hook(hook(i)) for i, p in enumerate(params)]
    try:
        yield fired
    finally:
        for h in handles:
            h.remove()


class StepGraphs:
    """The graphed steps of the replicas, with an optional host-side collective in between.

    Args:
        replicas: one :class:`ReplicaStep` per replica.
        between: called between all replicas' forward+backward and all their optimizer steps (the
            gradient all-reduce), or None: then each replica's whole step is one graph.
        param_names: names of replica 0's ``params`` (for the unused-parameter error).
        warmup: eager iterations before capture (at least 1: the optimizer makes its state in its first
            step, from host values, which a capture cannot contain).
    """

    def __init__(self, replicas: Sequence[ReplicaStep], *, between: Callable[[], None] | None = None,
                 param_names: Sequence[str] = (), warmup: int = WARMUP_ITERATIONS) -> None:
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
            raise ValueError(f"warmup: expected an integer >= 1 (the optimizer's state is made in its first "
                             f"step), but got {warmup!r}")
        self.replicas = list(replicas)
        self.between = between
        self.param_names = list(param_names)
        self.warmup = warmup
        self.graphs: list[list[Any]] = []
        self._replays: list[list[Callable[[], None]]] = []
        self.loader = BatchLoader([r.batch for r in self.replicas]) if self.replicas else None

    def _segments(self) -> list[list[Callable[[], None]]]:
        """The step as phases of per-replica calls, with ``between`` as a phase of its own."""
        if self.between is None:
            return [[r.whole for r in self.replicas]]
        return [[r.forward_backward for r in self.replicas], [self.between],
                [r.optimizer_step for r in self.replicas]]

    def _devices(self) -> list[torch.device]:
        return list(dict.fromkeys(r.device for r in self.replicas))

    @contextlib.contextmanager
    def _side_streams(self) -> Iterator[None]:
        """Each CUDA device's current stream becomes a fresh side stream (waiting for the old one)."""
        cuda = [d for d in self._devices() if d.type == "cuda"]
        if not cuda:
            yield
            return
        streams = {d: graph_stream(d) for d in cuda}
        with contextlib.ExitStack() as stack:
            for d, s in streams.items():
                s.wait_stream(torch.cuda.current_stream(d))
                stack.enter_context(torch.cuda.stream(s))
            yield
        for d, s in streams.items():
            torch.cuda.current_stream(d).wait_stream(s)

    def prepare(self) -> None:
        """Warm up on the examples the replicas' static buffers were made from, undo the warm-up, and capture.

        Raises:
            GraphCaptureError: a parameter got no gradient, or a segment cannot be captured (the message names
                the replica and why).  The warm-up is undone first.
        """
        snapshot = _Snapshot([r.model for r in self.replicas], [r.optimizer for r in self.replicas])
        segments = self._segments()
        try:
            with self._side_streams():
                for it in range(self.warmup):
                    with _hooks_fired(self.replicas[0].params) as fired:
                        self._run(segments)
                    if it == 0 and not all(fired):
                        self._unused(fired)
        finally:
            snapshot.restore()  # bucket gradients need nothing: every optimizer segment ends by zeroing them
        self.graphs = [self._capture_phase(phase, i) for i, phase in enumerate(segments)]
        self._replays = [[g.replay for g in graphs] for graphs in self.graphs]

    def _run(self, segments: list[list[Callable[[], None]]]) -> None:
        for phase in segments:
            for r, call in self._per_replica(phase):
                with _on(r.device if r is not None else None):
                    call()

    def _unused(self, fired: list[bool]) -> None:
        names = [self.param_names[i] if i < len(self.param_names) else f"parameter {i}"
                 for i, f in enumerate(fired) if not f]
        shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise GraphCaptureError(f"graphs=True: expected every parameter that requires grad to get a gradient in the "
                                f"step, but {shown} got none; a CUDA graph replays a fixed update, which would "
                                f"step it with a zero gradient (one device skips it): freeze it "
                                f"(requires_grad_(False)) before wrapping, {_FIX}")

    def _per_replica(self, phase: list[Callable[[], None]]) -> list[tuple[ReplicaStep | None, Callable[[], None]]]:
        if len(phase) == 1 and phase[0] is self.between:
            return [(None, phase[0])]
        return list(zip(self.replicas, phase, strict=True))

    def _capture_phase(self, phase: list[Callable[[], None]], index: int) -> list[Any]:
        if len(phase) == 1 and phase[0] is self.between:
            return []  # the collective is issued from the host at every step (see the module notes)
        names = {0: "forward+backward", 2: "optimizer step"} if self.between is not None else {0: "step"}
        pools = {d: torch.cuda.graph_pool_handle() if d.type == "cuda" else None for d in self._devices()}
        streams = {d: graph_stream(d) if d.type == "cuda" else None for d in self._devices()}
        graphs = []
        for i, (r, call) in enumerate(self._per_replica(phase)):
            what = f"replica {i} ({r.device}) {names[index]}"
            graphs.append(capture(call, device=r.device, stream=streams[r.device], pool=pools[r.device],
                                  what=what))
        return graphs

    def load(self, batch: tuple[Any, Any], step: int) -> None:
        """Copy step ``step``'s global ``(inputs, targets)`` into the replicas' static buffers (:class:`BatchLoader`;
        checked first)."""
        self.loader(batch, step)

    def replay(self, phase: int, replica: int | None = None) -> None:
        """Replay phase ``phase`` for every replica, or for ``replica`` alone (the collective phase calls
        ``between``, once, whatever ``replica`` says).

        Per replica, so that a caller may time (or, in a benchmark, start from an idle device) each
        replica's launch on its own; the replicas of a phase must all be replayed before the next phase.
        """
        replays = self._replays[phase]  # a graph's replay() makes its capture device current itself
        if not replays:
            if replica is None or replica == 0:
                self.between()
        elif replica is not None:
            replays[replica]()
        else:
            for replay in replays:
                replay()

    @property
    def phases(self) -> int:
        return len(self.graphs)

    def losses(self) -> list[torch.Tensor]:
        """Each replica's loss of the last replayed step (device scalars in the static buffers)."""
        return [r.loss for r in self.replicas]

    def weighted_losses(self) -> list[torch.Tensor]:
        """Each replica's ``loss * weight`` of the last replayed step: the terms of the step's loss."""
        return [r.weighted for r in self.replicas]


@contextlib.contextmanager
def _on(device: torch.device | None) -> Iterator[None]:
    """Make ``device`` current for CUDA calls inside the block (no-op for CPU or None)."""
    if device is not None and device.type == "cuda":
        with torch.cuda.device(device):
            yield
    else:
        yield
