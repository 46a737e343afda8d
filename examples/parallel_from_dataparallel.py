"""From ``nn.DataParallel`` to ``gpucomm.parallel.ReplicatedDataParallel``, and proof that it trains as one device does.

Run it anywhere: on CUDA devices if there are two or more, else on three CPU "devices" (every semantic of the
library runs on CPU tensors too).  The same model, seed and batches are trained twice — by the wrapper over
the devices and by a plain loop on one device — with an uneven last batch, gradient clipping and a learning-rate
schedule, and the script prints whether losses and parameters agree (fp32, relative 1e-5).

    python examples/parallel_from_dataparallel.py

The DataParallel loop it replaces (the lines marked "changed" are the migration)::

    model = nn.DataParallel(net.to("cuda:0"))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for x, y in batches:
        loss = F.cross_entropy(model(x), y.to("cuda:0"))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        sched.step()
"""

import copy

import torch
import torch.nn.functional as F
from torch import nn

from gpucomm.parallel import ReplicatedDataParallel


def devices() -> list[str]:
    n = torch.cuda.device_count()
    return [f"cuda:{i}" for i in range(n)] if n >= 2 else ["cpu", "cpu", "cpu"]


def batches(steps: int = 6) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    sizes = [24] * (steps - 1) + [17]  # the last batch does not split evenly
    return [(torch.randn(b, 16, generator=g), torch.randint(0, 5, (b,), generator=g)) for b in sizes]


def main() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 5))
    one = copy.deepcopy(net)  # the same initial weights, trained on one device below
    where = devices()

    model = ReplicatedDataParallel(net.to(where[0]), where, torch.optim.AdamW, lr=3e-3)       # changed
    sched = torch.optim.lr_scheduler.StepLR(model.optimizer, step_size=2, gamma=0.5)         # changed
    losses = []
    for x, y in batches():
        loss = model.loss(F.cross_entropy, model(x), y)                                     # changed
        loss.backward()
        model.clip_grad_norm_(1.0)                                                           # changed
        model.optimizer.step()                                                               # changed
        model.optimizer.zero_grad()                                                          # changed
        sched.step()
        losses.append(loss.item())

    one = one.to(where[0])
    opt = torch.optim.AdamW(one.parameters(), lr=3e-3)
    sched_1 = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    losses_1 = []
    for x, y in batches():
        loss = F.cross_entropy(one(x.to(where[0])), y.to(where[0]))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(one.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        sched_1.step()
        losses_1.append(loss.item())

    worst_loss = max(abs(a - b) / abs(b) for a, b in zip(losses, losses_1, strict=True))
    with torch.no_grad():
        diff = sum(float((p.double() - q.double()).norm() ** 2) for p, q in zip(model.module.parameters(),
                                                                                   one.parameters(), strict=True))
        norm = sum(float(q.double().norm() ** 2) for q in one.parameters())
    print(f"devices: {where}")
    print(f"losses equal to one device: {worst_loss <= 1e-5} (worst relative difference {worst_loss:.1e})")
    print(f"parameters equal to one device: {(diff / norm) ** 0.5 <= 1e-5}")
    print(f"replicas bit-identical: {model.verify_replicas() == []}")


if __name__ == "__main__":
    main()
