"""tests/parallel fixtures.

torch (2.13) sets ``TORCHINDUCTOR_CACHE_DIR`` in the process environment the first time an optimizer
steps: torch's one-time process state, not a leak of the test that runs first, so one AdamW step is
taken before any test here (as tests/train does; the leak check in tests/conftest.py stays strict).
"""

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _optimizer_initialised_once():
    p = torch.nn.Parameter(torch.zeros(1))
    p.grad = torch.zeros(1)
    torch.optim.AdamW([p]).step()
