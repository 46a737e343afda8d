"""--layout and --arch parsing, and the rules a layout must satisfy (one-line errors naming key and fix)."""

import pytest

from gpucomm import models
from gpucomm.advisor.layout import LAYOUT_KEYS, Layout, LayoutError, check, parse_arch, parse_layout, preset


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
    assert list(lo.as_dict()) == list(LAYOUT_KEYS) and lo.as_dict()["wrapper"] == "ddp"


def test_parse_the_mechanics_keys():
    got = parse_layout("pp=4,stages=7+9+9+7,vpp=1,shard=fsdp,reshard=step,tp_overlap=1,wrapper=ddp")
    assert got == {"pp": 4, "stages": (7, 9, 9, 7), "vpp": 1, "shard": "fsdp", "reshard": "step",
                   "tp_overlap": True, "wrapper": "ddp"}
    for text, word in (("stages=7+x", "stages='x'"), ("stages=7++8", "stages="), ("reshard=never", "fwd|bwd|step"),
                       ("tp_overlap=yes", "0|1"), ("wrapper=horovod", "dataparallel")):
        with pytest.raises(LayoutError, match=word):
            parse_layout(text)


@pytest.mark.parametrize("layout, kw, words", [
    (Layout(pp=4, dp=2, stages=(8, 8, 8, 7)), {}, ["sums to 31", "32 layers"]),
    (Layout(pp=4, dp=2, stages=(16, 16)), {}, ["2 stages", "pp=4"]),
    (Layout(pp=4, dp=2, vpp=3), {}, ["vpp=3", "8+8+8+8"]),
    (Layout(pp=4, dp=2, vpp=2, stages=(7, 9, 9, 7)), {}, ["vpp=2", "7"]),
    (Layout(dp=8, reshard="step"), {}, ["reshard=step", "shard=none"]),
    (Layout(dp=8, tp_overlap=True), {}, ["tp_overlap", "tp > 1"]),
    (Layout(dp=8, shard="fsdp", ag_overlap=True), {}, ["ag_overlap", "shard=fsdp"]),
    (Layout(dp=8, wrapper="none"), {}, ["wrapper=none", "ddp"]),
    (Layout(tp=2, dp=4, wrapper="dataparallel"), {}, ["wrapper=dataparallel", "tp=pp=cp=1"]),
    (Layout(dp=16, wrapper="replicated"), {"gpus": 16, "nodes": 2}, ["one machine", "2 machines"]),
])
def test_check_the_mechanics_rules(layout, kw, words):
    args = {"gpus": 8, "gpus_per_node": 8, "global_batch": 16, "seq": 8192, "nodes": 1, **kw}
    with pytest.raises(LayoutError) as e:
        check(layout, ARCH, **args)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_a_published_uneven_split_with_virtual_stages_is_valid():
    # Llama 3 405B: 126 layers over 16 stages, the first and last one layer lighter (Llama 3 paper, Sec. 3.3.2)
    arch = models.get("llama3-405b")
    stages = (7,) + (8,) * 14 + (7,)
    check(Layout(tp=8, pp=16, dp=4, stages=stages), arch, gpus=512, gpus_per_node=8, global_batch=16, seq=8192,
          nodes=64)
    assert Layout(pp=16, stages=stages).stage_layers(126) == stages
    assert Layout(pp=4).stage_layers(30) == (8, 8, 7, 7)


def test_presets_are_layouts():
    assert preset("dp", 4, 64) == Layout(dp=4, mb=16, wrapper="dataparallel")
    assert preset("fsdp", 4, 64).shard == "fsdp" and preset("single", 1, 8).wrap == "none"
    assert preset("ddp", 1, 8).wrap == "ddp"
    with pytest.raises(LayoutError, match="--strategies 'horovod'"):
        preset("horovod", 2, 8)
    with pytest.raises(LayoutError, match="--global-batch 9"):
        preset("ddp", 2, 9)


def test_virtual_stages_may_count_the_embedding_and_the_head_as_a_chunk():
    from gpucomm.advisor.layout import vpp_misfits

    llama3 = (7,) + (8,) * 14 + (7,)
    assert vpp_misfits(llama3, 8) == []  # first chunk the embedding alone, last the head and loss alone
    assert vpp_misfits(llama3, 2) == []
    assert vpp_misfits((8, 7, 8, 8), 2) == [7]  # a middle stage has neither
    assert vpp_misfits((8, 8, 8, 8), 3) == [8, 8]  # 8 + 1 = 9 fits the ends only
