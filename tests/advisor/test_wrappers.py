"""Wrapper costs: none for no wrapper, assumed host costs said so, calibrated ones from the profile."""

import dataclasses

from gpucomm.advisor import hardware, wrappers
from gpucomm.advisor.layout import Layout


def test_defaults_are_assumed_and_said_so():
    prof = hardware.get("h200-nvswitch")
    assert wrappers.cost(prof, Layout()) == wrappers.WrapperCost()
    dp = wrappers.cost(prof, Layout(dp=8, wrapper="dataparallel"))
    assert dp.per_device_s == wrappers.DEFAULT_PER_DEVICE_S["dataparallel"] and "ASSUMED" in dp.note
    assert wrappers.cost(prof, Layout(dp=8)).per_device_s == 0.0


def test_calibrated_costs_win_and_sharded_wrappers_take_ddps():
    prof = dataclasses.replace(hardware.get("h200-nvswitch"),
                               calibration={"per_device_s": {"ddp": 0.001, "replicated": 0.0},
                                            "slowdown": {"ddp": 0.05}})
    c = wrappers.cost(prof, Layout(dp=8, shard="fsdp"))
    assert (c.per_device_s, c.slowdown) == (0.001, 0.05) and "calibrated" in c.note
    assert wrappers.cost(prof, Layout(dp=8, wrapper="replicated")).per_device_s == 0.0
