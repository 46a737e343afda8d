"""benchmarks/gpt_vs_nanogpt.py: the built-in GPT is nanoGPT's function, and the benchmark runs in CI size on CPU.

The timing figures themselves come from an H200 (benchmarks/gpu/gpt.sh); here only the form of the output
and the models' equality are checked.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpt_vs_nanogpt.py"


def _script():
    if "gpt_vs_nanogpt" not in sys.modules:  # dataclasses need the module registered while it loads
        spec = importlib.util.spec_from_file_location("gpt_vs_nanogpt", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["gpt_vs_nanogpt"]


def _tiny():
    from gpucomm import models as shapes
    from gpucomm.train.models import GPTConfig, load_workload

    return load_workload("gpt-tiny", seed=0), GPTConfig.from_architecture(shapes.get("gpt-tiny"))


def test_the_builtin_gpt_computes_what_nanogpts_computes():
    workload, cfg = _tiny()
    assert _script().same_function(workload, cfg, batch=4) < 1e-6


def test_the_check_sees_a_different_gelu(monkeypatch):
    script = _script()
    class TanhGELU(torch.nn.GELU):
        def __init__(self):
            super().__init__(approximate="tanh")

    monkeypatch.setattr(script.nn, "GELU", TanhGELU)
    workload, cfg = _tiny()
    assert script.same_function(workload, cfg, batch=4) > 1e-6


def test_nanogpt_optimizer_decays_matrices_only():
    workload, cfg = _tiny()
    model = _script().NanoGPT(cfg)
    decay, no_decay = _script().nanogpt_optimizer(model, 6e-4, cuda=False).param_groups
    assert decay["weight_decay"] == 0.1 and all(p.dim() >= 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.dim() < 2 for p in no_decay["params"])
    assert decay["betas"] == (0.9, 0.95)


def test_tiny_run_prints_every_block_and_the_ratios(tmp_path):
    out_file = tmp_path / "results" / "gpt-vs-nanogpt_cpu_test.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--model", "gpt-tiny", "--batch", "4",
                           "--steps", "2", "--warmup", "2", "--rounds", "2", "--out", str(out_file)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = out_file.read_text()
    assert text == proc.stdout
    assert "# command: " in text and "--rounds 2" in text and "CPU numbers" in text
    assert re.search(r"# same function: .* relative difference \d\.\de[+-]\d\d", text)
    rows = [line.split() for line in text.splitlines() if re.match(r"\s*\d+ (builtin|nanogpt) ", line)]
    assert [(int(r[0]), r[1]) for r in rows] == [(0, "builtin"), (0, "nanogpt"), (1, "nanogpt"), (1, "builtin")]
    assert all(float(r[2]) > 0 and float(r[3]) > 0 and r[4] == "n/a" for r in rows)
    assert re.search(r"^builtin/nanogpt time \d+\.\d{3}x \(rounds: [\d., ]+\); (within|ABOVE) the target 1.02x$",
                     text, re.M)
    assert "builtin/nanogpt memory: n/a" in text


def test_bad_counts_are_one_line_exit_2():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for flags in (["--rounds", "0"], ["--warmup", "1"], ["--model", "mlp"]):
        proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", *flags], capture_output=True,
                              text=True, env=env, timeout=120)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and flags[0] in proc.stderr, proc.stderr
