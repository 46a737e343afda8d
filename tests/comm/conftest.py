"""Shared helpers for the gpucomm.comm tests: the case table is loaded by path (importlib import mode)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("comm_cases", Path(__file__).with_name("_cases.py"))
_cases = importlib.util.module_from_spec(_spec)
sys.modules["comm_cases"] = _cases
_spec.loader.exec_module(_cases)
