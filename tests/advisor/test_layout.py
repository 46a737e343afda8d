"""--layout and --arch parsing, and the rules a layout must satisfy (one-line errors naming key and fix)."""

import pytest

from gpucomm import models
from gpucomm.advisor.layout import Layout, LayoutError, check, parse_arch, parse_layout


def test_parse_layout_fixes_given_keys_only():
    assert parse_layout("tp=8,pp=4,shard=fsdp,ac=auto") == {"tp": 8, "pp": 4, "shard": "fsdp"}
    assert parse_layout("") == {}
    # two "selective" kinds: Megatron's (attention core) keeps its name, torchtitan's per-op policy is "op"
    assert parse_layout("ac=selective") == {"ac": "selective"} and parse_layout("ac=op") == {"ac": "op"}


@pytest.mark.parametrize("text, words", [
    ("tp=8,foo=1", ["foo", "known keys"]),
    ("tp=0", ["tp='0'", ">= 1"]),
    ("tp=two", ["tp='two'"]),
    ("shard=zero4", ["zero4", "zero3"]),
    ("ac=some", ["some", "none|selective|op|full|auto"]),
    ("tp", ["key=value"]),
    ("tp=2,tp=4", ["twice"]),
])
def test_parse_layout_errors(text, words):
    with pytest.raises(LayoutError) as e:
        parse_layout(text)
    assert all(w in str(e.value) for w in words) and "\n" not in str(e.value)


def test_parse_arch_defaults_and_swiglu():
    a = parse_arch("layers=32,hidden=4096,heads=32,kv_heads=8,ffn=14336,vocab=128256,seq=8192")
    assert a.ffn_kind == "swiglu" and a.params() == models.get("llama3-8b").params()
    g = parse_arch("layers=12,hidden=768,heads=12")
    assert g.ffn_hidden == 4 * 768 and g.ffn_kind == "gelu-4h"


@pytest.mark.parametrize("text, word", [("layers=2,hidden=64", "heads"), ("layers=2,hidden=64,heads=5", "heads=5"),
                                        ("layers=2,hidden=64,heads=4,depth=3", "depth")])
def test_parse_arch_errors(text, word):
    with pytest.raises(LayoutError, match=word):
        parse_arch(text)


ARCH = models.get("llama3-8b")


@pytest.mark.parametrize("layout, kw, words", [
    (Layout(tp=3, dp=1), {"gpus": 3}, ["tp=3", "32 attention heads"]),
    (Layout(tp=16, dp=1), {"gpus": 16, "nodes": 2}, ["tp=16", "exceeds", "8 GPUs"]),
    (Layout(tp=2, dp=2), {"gpus": 8}, ["dp*tp*pp*cp", "8 GPUs"]),
    (Layout(dp=8, mb=3), {"gpus": 8}, ["mb=3", "per-replica batch 2"]),
    (Layout(dp=8), {"gpus": 8, "global_batch": 12}, ["--global-batch 12", "multiple of 8"]),
    (Layout(dp=8, shard="hsdp"), {"gpus": 8}, ["hsdp", "one"]),
    (Layout(pp=2, dp=4, vpp=3), {"gpus": 8}, ["vpp=3"]),
    (Layout(cp=3, dp=1), {"gpus": 3}, ["cp=3", "8192"]),
])
def test_check_names_the_broken_rule(layout, kw, words):
    args = {"gpus": 8, "gpus_per_node": 8, "global_batch": 16, "seq": 8192, "nodes": 1, **kw}
    with pytest.raises(LayoutError) as e:
        check(layout, ARCH, **args)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_label_and_dict():
    lo = Layout(tp=8, pp=4, dp=32, mb=1, ac="full", vpp=2)
    assert lo.label() == "tp8 pp4 dp32 vpp2 mb1 ac=full"
    assert list(lo.as_dict()) == ["tp", "pp", "cp", "dp", "shard", "mb", "ac", "vpp"]
