"""Numerics: compute dtype, weight storage, optimizer — bytes per parameter as ZeRO and autocast hold them."""

import pytest

from gpucomm.advisor.precision import Precision, PrecisionError, from_record


def test_autocast_over_fp32_weights_is_the_default():
    p = Precision()
    assert (p.compute, p.weights, p.optimizer) == ("bf16", "fp32", "adam")
    assert (p.weight_bytes, p.grad_bytes, p.optimizer_bytes, p.compute_bytes) == (4, 4, 8, 2)
    assert p.autocast


def test_sixteen_bit_weights_are_zeros_2_2_12():
    p = Precision(weights="bf16")
    assert (p.weight_bytes, p.grad_bytes, p.optimizer_bytes) == (2, 2, 12) and not p.autocast
    assert Precision(weights="fp16", compute="fp16", optimizer="sgd").optimizer_bytes == 8  # master + momentum
    assert Precision(compute="fp32").compute_bytes == 4 and not Precision(compute="fp32").autocast


@pytest.mark.parametrize("kw, word", [({"compute": "int8"}, "--dtype"), ({"weights": "fp8"}, "--weights"),
                                      ({"optimizer": "lion"}, "--optimizer"),
                                      ({"compute": "fp32", "weights": "bf16"}, "16-bit compute")])
def test_bad_numerics_name_the_flag(kw, word):
    with pytest.raises(PrecisionError, match=word):
        Precision(**kw)


def test_record_names():
    assert from_record("bf16-autocast") == Precision()
    assert from_record("fp32").compute == "fp32"
    with pytest.raises(PrecisionError):
        from_record("bf16")
