"""User factories for the tests (imported as ``gpucomm_train_factory_example:<name>``).

``factory`` is the docs/train.md example: a small regression MLP with its own batch and loss
functions.  The others are broken on purpose, each in one way.
"""

from __future__ import annotations

import torch
from torch import nn


def factory():
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))

    def batch_fn(seed: int, step: int, global_batch: int):
        g = torch.Generator().manual_seed(seed * 7919 + step)
        x = torch.randn(global_batch, 8, generator=g)
        return x, x.sum(dim=1, keepdim=True).sin()

    def loss_fn(outputs, targets):
        return nn.functional.mse_loss(outputs, targets)  # the mean over the samples given

    return model, batch_fn, loss_fn


def raising_factory():
    raise RuntimeError("no weights here")


def wrong_factory():
    return nn.Linear(2, 2)


def not_a_module_factory():
    return "model", (lambda s, t, b: None), (lambda o, t: None)


not_callable = 42


def slow_in_ranks_factory():
    """``factory``, but in a launched rank (``RANK`` set) each batch touches ``$GPUCOMM_TEST_MARK`` and
    sleeps: the interrupt tests use it to stop a run during its DDP phase."""
    import os
    import pathlib
    import time

    model, batch_fn, loss_fn = factory()

    def slow_batch_fn(seed: int, step: int, global_batch: int):
        if "RANK" in os.environ and "GPUCOMM_TEST_MARK" in os.environ:
            pathlib.Path(os.environ["GPUCOMM_TEST_MARK"]).touch()
            time.sleep(0.5)
        return batch_fn(seed, step, global_batch)

    return model, slow_batch_fn, loss_fn


def _touch_mark() -> None:
    import os
    import pathlib

    if "GPUCOMM_TEST_MARK" in os.environ:
        pathlib.Path(os.environ["GPUCOMM_TEST_MARK"]).touch()


def slow_loss_factory():
    """``factory``, but from the third loss on, each call touches ``$GPUCOMM_TEST_MARK`` and sleeps: an
    interrupt then lands in a strategy that has finished at least two steps."""
    import time

    model, batch_fn, loss_fn = factory()
    calls = []

    def slow_loss_fn(outputs, targets):
        calls.append(1)
        if len(calls) >= 3:
            _touch_mark()
            time.sleep(0.3)
        return loss_fn(outputs, targets)

    return model, batch_fn, slow_loss_fn


def slow_build_factory():
    """Touches ``$GPUCOMM_TEST_MARK`` and sleeps before returning ``factory()``: an interrupt then lands
    before any strategy has started."""
    import time

    _touch_mark()
    time.sleep(30)
    return factory()


def hang_in_rank1_factory():
    """``factory``, but in launched rank 1 every loss sleeps for ten minutes: a hung DDP rank."""
    import os
    import time

    model, batch_fn, loss_fn = factory()

    def hanging_loss_fn(outputs, targets):
        if os.environ.get("RANK") == "1":
            time.sleep(600)
        return loss_fn(outputs, targets)

    return model, batch_fn, hanging_loss_fn
