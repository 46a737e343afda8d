"""gpucomm.dist.debug: how the cross-rank check is switched on (its cross-rank behaviour is tested in
test_launch.py and test_collectives.py, where there are ranks)."""

from __future__ import annotations

import pytest
import torch

import gpucomm.dist as gd
from gpucomm.dist.debug import ENV_VAR, debug_check_enabled, set_debug_check


@pytest.mark.parametrize(("value", "on"), [("1", True), ("true", True), ("0", False), ("", False)])
def test_the_env_var_switches_it(monkeypatch, value, on):
    monkeypatch.setenv(ENV_VAR, value)
    assert debug_check_enabled() is on


def test_set_debug_check_overrides_the_env_var(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "1")
    try:
        set_debug_check(False)
        assert not debug_check_enabled()
        set_debug_check(None)
        assert debug_check_enabled()
    finally:
        set_debug_check(None)
    with pytest.raises(TypeError, match="True, False or None"):
        set_debug_check("yes")


def test_a_world_of_one_always_agrees(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "1")
    with gd.init("gloo"):
        t = torch.arange(4.0)
        gd.all_reduce(t)
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_maybe_on_is_false_only_when_the_check_is_surely_off(monkeypatch):
    from gpucomm.dist import debug

    monkeypatch.delenv(ENV_VAR, raising=False)
    assert not debug.maybe_on[0]() and not debug_check_enabled()
    monkeypatch.setenv(ENV_VAR, "0")  # present: maybe on (the full check then reads it as off)
    assert debug.maybe_on[0]() and not debug_check_enabled()
    monkeypatch.delenv(ENV_VAR)
    try:
        for override in (True, False):
            set_debug_check(override)
            assert debug.maybe_on[0]() and debug_check_enabled() is override
    finally:
        set_debug_check(None)
    assert not debug.maybe_on[0]()
