"""Make the bench test doubles importable as ``bench_doubles`` (test folders are not packages)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("bench_doubles", Path(__file__).with_name("_doubles.py"))
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
sys.modules.setdefault("bench_doubles", _module)
