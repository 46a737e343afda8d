"""Make the row-test harness importable as ``collectives_harness`` (test folders are not packages)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("collectives_harness", Path(__file__).with_name("_harness.py"))
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
sys.modules.setdefault("collectives_harness", _module)
