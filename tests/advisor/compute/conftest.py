"""torch's per-op checkpointing and CPU fused AdamW touch inductor's cache directory, which sets
``TORCHINDUCTOR_CACHE_DIR`` in the environment: give it a temporary one per test (restored afterwards)."""

import pytest


@pytest.fixture(autouse=True)
def _inductor_cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor")))
