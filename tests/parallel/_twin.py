"""Helpers for the gpucomm.parallel tests: small models, deterministic batches, and the one-device comparison.

Equality is judged as ``gpucomm train --assert-equal`` judges it: per step ``|loss - loss_1| / |loss_1|``,
and over the whole model ``||theta - theta_1|| / ||theta_1||``, both within the tolerance (fp32 1e-5,
bf16 autocast 3e-2).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

CPU3 = ["cpu", "cpu", "cpu"]
FP32 = 1e-5
BF16 = 3e-2


def mlp(seed: int = 0, d_in: int = 8, classes: int = 4) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, 32), nn.Tanh(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, classes))


def batch(step: int, size: int, d_in: int = 8, classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(size, d_in, generator=g), torch.randint(0, classes, (size,), generator=g)


@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    aux: torch.Tensor
    note: str = "dataclass"


class MultiIO(nn.Module):
    """Takes a tuple and keyword dict inputs; returns a dict, a dataclass or a tuple of outputs."""

    def __init__(self, kind: str = "dict") -> None:
        super().__init__()
        torch.manual_seed(3)
        self.kind = kind
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(4, 16)
        self.head = nn.Linear(16, 4)
        self.aux = nn.Linear(16, 1)

    def forward(self, pair, *, extra: dict, scale: float = 1.0):
        x, z = pair
        h = torch.tanh(self.a(x) + self.b(z) * extra["gain"]) * scale
        logits, aux = self.head(h), self.aux(h).squeeze(-1)
        if self.kind == "dict":
            return {"logits": logits, "aux": aux}
        if self.kind == "dataclass":
            return Out(logits, aux)
        return logits, aux


def multi_loss(out, target) -> torch.Tensor:
    if isinstance(out, dict):
        logits, aux = out["logits"], out["aux"]
    elif isinstance(out, Out):
        logits, aux = out.logits, out.aux
    else:
        logits, aux = out
    return F.cross_entropy(logits, target["y"]) + 0.1 * F.mse_loss(aux, target["t"])


def multi_batch(step: int, size: int):
    g = torch.Generator().manual_seed(2000 + step)
    x, z = torch.randn(size, 8, generator=g), torch.randn(size, 4, generator=g)
    gain = torch.rand(size, 1, generator=g) + 0.5
    targets = {"y": torch.randint(0, 4, (size,), generator=g), "t": torch.randn(size, generator=g)}
    return (x, z), {"gain": gain}, targets


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def param_rel(a: nn.Module, b: nn.Module) -> float:
    """Whole-model relative difference of the parameters."""
    num = sum(float((x.detach().cpu().double() - y.detach().cpu().double()).norm() ** 2)
              for x, y in zip(a.parameters(), b.parameters(), strict=True))
    den = sum(float(y.detach().cpu().double().norm() ** 2) for y in b.parameters())
    return (num / den) ** 0.5


def assert_equal_runs(losses: list[float], single_losses: list[float], model: nn.Module, single: nn.Module,
                      tol: float = FP32) -> None:
    assert len(losses) == len(single_losses)
    worst = max(rel(a, b) for a, b in zip(losses, single_losses, strict=True))
    assert worst <= tol, (worst, losses, single_losses)
    assert param_rel(model, single) <= tol, param_rel(model, single)
