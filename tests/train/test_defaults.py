"""The parser's names and defaults: importable without torch, and agreeing with what they name."""

import subprocess
import sys
from pathlib import Path

from gpucomm import models as shapes
from gpucomm.train import defaults


def test_no_torch_needed():
    src = Path(__file__).resolve().parents[2] / "src"
    code = "import sys; import gpucomm.train.defaults; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(src), "PATH": ""})
    assert out.stdout.strip() == "False"


def test_names_agree_with_the_registry_and_the_shape_table():
    from gpucomm.train.models import MODELS
    from gpucomm.train.strategies import names

    assert set(defaults.DEFAULT_STRATEGIES) <= set(names())
    assert set(defaults.BUILTIN_GPTS) <= set(shapes.names()) and set(defaults.BUILTIN_GPTS) <= set(MODELS)
    for device_type in ("cuda", "cpu"):
        assert defaults.DEFAULT_MODELS[device_type] in MODELS
        assert defaults.DEFAULT_GLOBAL_BATCH[device_type] % 2 == 0 and defaults.DEFAULT_STEPS[device_type] > 5


def test_bf16_means_autocast_over_fp32_weights_everywhere_in_train():
    from gpucomm.train.config import TOLERANCES, TrainConfig

    assert defaults.RESOLVED_PRECISIONS == {"fp32": "fp32", "bf16": defaults.BF16_AUTOCAST}
    assert defaults.BF16_AUTOCAST == "bf16-autocast" and set(TOLERANCES) == set(defaults.RESOLVED_PRECISIONS.values())
    assert set(defaults.PRECISIONS) == {"auto", *defaults.RESOLVED_PRECISIONS}
    assert TrainConfig(devices=["cpu"], precision="auto").resolved_precision() == defaults.FP32
