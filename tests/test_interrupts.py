"""One interrupt stops the work, a second cannot stop the clean-up; handlers come back afterwards."""

from __future__ import annotations

import os
import signal

import pytest

from gpucomm._interrupts import interrupts


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_first_signal_raises_then_both_are_ignored_until_the_block_ends(sig, status):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with interrupts() as state:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig)
        os.kill(os.getpid(), signal.SIGINT)  # the clean-up goes on
        os.kill(os.getpid(), signal.SIGTERM)
        cleaned_up = True
    assert cleaned_up and state.signum == sig and state.exit_status == status and state.name == sig.name
    assert {s: signal.getsignal(s) for s in before} == before


def test_an_interrupt_raised_by_code_counts_as_sigint():
    with interrupts() as state, pytest.raises(KeyboardInterrupt):
        raise KeyboardInterrupt
    assert state.signum is None and state.exit_status == 130 and state.name == "SIGINT"
