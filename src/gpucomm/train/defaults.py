"""The names and defaults of ``gpucomm train`` that its parser needs, without importing torch.

``gpucomm train --help`` must not import torch (it takes seconds), so the choices its flags offer live
here, as plain data; :mod:`gpucomm.train.config`, :mod:`gpucomm.train.models` and the strategy registry
read them from here (one home each) and check them against what they build.
"""

from __future__ import annotations

__all__ = ["BF16_AUTOCAST", "BUILTIN_GPTS", "DEFAULT_GLOBAL_BATCH", "DEFAULT_MODELS", "DEFAULT_STEPS",
           "DEFAULT_STRATEGIES", "FP32", "OPTIMIZERS", "PRECISIONS", "RESOLVED_PRECISIONS"]

DEFAULT_STRATEGIES: tuple[str, ...] = ("single", "dp", "replicated", "ddp")
"""What ``gpucomm train`` compares when ``--strategies`` is not given (the registry may hold more)."""

BUILTIN_GPTS: tuple[str, ...] = ("gpt-tiny", "gpt-124m", "gpt-350m")
"""The shapes of :mod:`gpucomm.models` that the built-in GPT builds (GPT-2 style: LayerNorm, biases,
learned positions, tied head); the others (Llama's SwiGLU and rotary positions) are for the advisor."""

DEFAULT_MODELS: dict[str, str] = {"cuda": "gpt-124m", "cpu": "gpt-tiny"}
"""The model used when ``--model`` is not given, by device type: GPT-2 small on GPUs; on a CPU-only
machine gpt-tiny, so that a run with no flags finishes in seconds (GPT-124M at batch 32 needs about
20 GiB and minutes per step on two cores)."""

DEFAULT_STEPS: dict[str, int] = {"cuda": 50, "cpu": 20}
"""``--steps`` when not given, by device type: on CPU the run exercises the code paths and checks
equality; 20 steps do that (and keep a plain ``gpucomm train`` on two cores well under a minute)."""

DEFAULT_GLOBAL_BATCH: dict[str, int] = {"cuda": 32, "cpu": 16}
"""``--global-batch`` when not given, by device type (divisible by 2, 4, 8 and 16 devices)."""

FP32 = "fp32"
"""Precision: fp32 weights and fp32 compute."""
BF16_AUTOCAST = "bf16-autocast"
"""Precision: bf16 autocast compute over fp32 weights (the optimizer steps fp32 master weights).  This is
the one meaning of "bf16" in gpucomm (``--precision bf16``, the advisor's default mixed precision); a
16-bit *weight storage* is a separately named choice, never the bare word."""

PRECISIONS: tuple[str, ...] = ("auto", FP32, "bf16")
"""``--precision``: "auto" (:data:`BF16_AUTOCAST` on CUDA, :data:`FP32` on CPU), "fp32", "bf16" (that is,
:data:`BF16_AUTOCAST`; CUDA only)."""

RESOLVED_PRECISIONS: dict[str, str] = {"fp32": FP32, "bf16": BF16_AUTOCAST}
"""What each explicit ``--precision`` resolves to, the name records and tolerances carry."""

OPTIMIZERS: tuple[str, ...] = ("adamw", "sgd")
"""``--optimizer``: AdamW (fused on CUDA) or plain SGD."""
