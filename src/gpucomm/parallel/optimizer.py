"""``ReplicatedOptimizer``: one optimizer to the user, one per replica underneath.

Every replica keeps its own optimizer (built by the user's class or factory on that replica's
parameters) and steps it on the identical averaged gradients, so no parameter is ever broadcast and
the replicas stay bit-identical.  The user sees one ``torch.optim.Optimizer``:

* ``param_groups`` has one group per group of the user's optimizer, holding its hyperparameters.
  Change them there — by hand or through any ``torch.optim.lr_scheduler`` — and every replica's
  optimizer gets the new values at the next :meth:`step`.  A group's ``"params"`` lists that group's
  parameters of **every** replica, so that ``torch.amp.GradScaler.unscale_`` unscales (and checks
  for infs) every replica's gradients; clip with :meth:`ReplicatedDataParallel.clip_grad_norm_
  <gpucomm.parallel.ReplicatedDataParallel.clip_grad_norm_>`, not over these lists.  With one replica
  the groups *are* that replica's optimizer's groups.
* :meth:`state_dict` is replica 0's optimizer's: exactly what the same optimizer on one device saves
  (parameter ids 0..n-1 in ``module.parameters()`` order, the same state).  :meth:`load_state_dict`
  loads one such dict into every replica's optimizer, so checkpoints move between one device, this and
  DDP (``ddp_optimizer.state_dict()``).
* Under CUDA graphs the captured optimizer step reads its learning rate from a device tensor that
  :meth:`step` refreshes when a group's ``"lr"`` changes; hyperparameters that were captured as
  constants (``betas``, ``weight_decay``, ...) may not change after capture, and a change raises.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["ReplicatedOptimizer"]


class ReplicatedOptimizer(torch.optim.Optimizer):
    """The replicas' optimizers behind one ``torch.optim.Optimizer`` (module notes).

    Args:
        optimizers: one per replica, replica 0 first, with the same group structure.
        step_fn: steps the replicas (called by :meth:`step` after the hyperparameters are synced).
        zero_grad_fn: ``zero_grad_fn(set_to_none)`` clears the replicas' gradients.
    """

    _step_supports_amp_scaling = False  # GradScaler unscales through param_groups, then calls step()

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer], *, step_fn: Callable[[], Any],
                 zero_grad_fn: Callable[[bool], None]) -> None:
        self.optimizers = list(optimizers)
        first = self.optimizers[0]
        self._step_fn, self._zero_grad_fn = step_fn, zero_grad_fn
        self._shared = len(self.optimizers) == 1
        groups = [{**{k: v for k, v in g.items() if k != "params"},
                   "params": [p for opt in self.optimizers for p in opt.param_groups[i]["params"]]}
                  for i, g in enumerate(first.param_groups)]
        self._initializing = True
        super().__init__(groups, dict(first.defaults))
        self._initializing = False
        if self._shared:  # one replica: its optimizer's own groups, no copy to keep in step
            self.param_groups = first.param_groups
        self.state = first.state
        self._device_lr: list[list[torch.Tensor]] | None = None
        self._last_lr: list[float] = []
        self._frozen: list[dict[str, Any]] | None = None
        self._frozen_keys: tuple[str, ...] = ()
        self._frozen_values: list[tuple] = []

    def __repr__(self) -> str:
        return f"ReplicatedOptimizer({len(self.optimizers)} x {type(self.optimizers[0]).__name__})"

    # ----- hyperparameters --------------------------------------------------------------------------
    def _sync(self) -> None:
        """Copy every group's hyperparameters to every replica's optimizer (under graphs: check that the captured
        ones are unchanged, and refresh the device lr when a group's lr changed)."""
        if self._device_lr is not None:
            self._sync_captured()
            return
        if self._shared:
            return
        for i, fg in enumerate(self.param_groups):
            for opt in self.optimizers:
                rg = opt.param_groups[i]
                for k, v in fg.items():
                    if k != "params" and rg.get(k) is not v:
                        rg[k] = v

    def _sync_captured(self) -> None:
        """Graphs: a captured step reads only its lr tensors; every other hyperparameter it was captured with is
        frozen (checked here), so nothing else is copied — no per-key loop over the replicas at every step."""
        self._check_frozen()
        for i, fg in enumerate(self.param_groups):
            lr = fg["lr"]
            if lr != self._last_lr[i]:
                lr = float(lr)
                for t in self._device_lr[i]:
                    t.fill_(lr)
                self._last_lr[i] = lr

    def use_device_lr(self) -> None:
        """Graphs: give every replica group whose optimizer takes a tensor lr (``capturable`` or ``fused``) a
        device tensor for it, and freeze every other hyperparameter the optimizer reads."""
        self._unshare()
        self._sync()
        tensors = []
        for i, fg in enumerate(self.param_groups):
            row = []
            for opt in self.optimizers:
                rg = opt.param_groups[i]
                if (rg.get("capturable") or rg.get("fused")) and rg["params"]:
                    rg["lr"] = torch.tensor(float(fg["lr"]), dtype=torch.float32, device=rg["params"][0].device)
                    row.append(rg["lr"])
            tensors.append(row)
        self._device_lr = tensors
        self._last_lr = [float(g["lr"]) for g in self.param_groups]
        every = all(len(row) == len(self.optimizers) for row in tensors)
        self._frozen_keys = tuple(k for k in self.defaults if k != "lr" or not every)
        self._frozen = [{k: g.get(k) for k in self._frozen_keys} for g in self.param_groups]
        self._frozen_values = [tuple(f.values()) for f in self._frozen]

    def _unshare(self) -> None:
        """Separate groups even with one replica (graphs keep device tensors in the replica's own)."""
        if self._shared:
            self.param_groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": list(g["params"])}
                                 for g in self.optimizers[0].param_groups]
            self._shared = False

    def _check_frozen(self, groups: Sequence[dict[str, Any]] | None = None, what: str = "param_groups") -> None:
        if groups is None:  # every step: one tuple comparison per group, the message only on a change
            get = [g.get for g in self.param_groups]
            if all(tuple(map(g, self._frozen_keys)) == v for g, v in zip(get, self._frozen_values, strict=True)):
                return
        for i, (g, frozen) in enumerate(zip(groups or self.param_groups, self._frozen, strict=True)):
            for k, captured in frozen.items():
                if g.get(k) != captured:
                    raise ValueError(f"{what}[{i}][{k!r}]: expected {captured!r}, the value the CUDA graph captured, "
                                     f"but got {g.get(k)!r}; a captured optimizer step replays its hyperparameters "
                                     f"(only 'lr' is read from the device): rebuild with the new value, or use "
                                     f"graphs=False")

    # ----- the Optimizer interface ------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if self._initializing:
            super().add_param_group(param_group)
            return
        raise NotImplementedError("add_param_group: every replica's optimizer would need the group on its own "
                                  "replica's parameters; give all groups to the optimizer factory instead")

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Step every replica's optimizer (after copying the hyperparameters to them)."""
        if closure is not None:
            raise ValueError("closure: expected None, but got a closure; each replica's optimizer would call it "
                             "on its own replica: compute the loss and backward before step()")
        self._sync()
        return self._step_fn()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every replica's gradients."""
        self._zero_grad_fn(set_to_none)

    def state_dict(self) -> dict[str, Any]:
        """Replica 0's optimizer's state dict, with the hyperparameters the user sees (module notes)."""
        sd = self.optimizers[0].state_dict()
        for packed, fg in zip(sd["param_groups"], self.param_groups, strict=True):
            for k, v in fg.items():
                if k != "params":
                    packed[k] = v
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load one optimizer's state dict (from one device, this, or DDP) into every replica's optimizer."""
        if self._frozen is not None:
            self._check_frozen(state_dict.get("param_groups", []), "state_dict['param_groups']")
        for opt in self.optimizers:
            # torch keeps the given tensors where they already sit on the right device: each replica needs its own
            # copy (and none aliases the caller's dict, which may be loaded elsewhere too)
            own = copy.deepcopy(state_dict)
            if self._device_lr is None:
                opt.load_state_dict(own)
            else:
                _load_in_place(opt, own)
        first = self.optimizers[0]
        self.state = first.state
        if self._shared:  # load_state_dict replaced the optimizer's group list
            self.param_groups = first.param_groups
            return
        for fg, rg in zip(self.param_groups, first.param_groups, strict=True):
            for k, v in rg.items():
                if k != "params" and not (k == "lr" and isinstance(v, torch.Tensor)):
                    fg[k] = v
        if self._device_lr is not None:
            for fg, g in zip(self.param_groups, state_dict["param_groups"], strict=True):
                fg["lr"] = float(g["lr"])
            self._last_lr = [float("nan")] * len(self._last_lr)
            self._sync()


def _load_in_place(opt: torch.optim.Optimizer, state_dict: dict[str, Any]) -> None:
    """``opt.load_state_dict`` keeping every existing state tensor and device lr at its address (a captured
    graph reads them there): the loaded values are copied into the old tensors."""
    old_state = {p: dict(s) for p, s in opt.state.items()}
    old_lr = [g["lr"] for g in opt.param_groups]
    opt.load_state_dict(state_dict)
    with torch.no_grad():
        for p, state in opt.state.items():
            for k, old in old_state.get(p, {}).items():
                new = state.get(k)
                if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor):
                    old.copy_(new)
                    state[k] = old
        for g, lr in zip(opt.param_groups, old_lr, strict=True):
            if isinstance(lr, torch.Tensor):
                lr.fill_(float(g["lr"]))
                g["lr"] = lr
