"""How advise shows its answer: at most five lines, the row's own time in its reason, JSON and records."""

import json

from gpucomm.advisor import answer, hardware, render
from gpucomm.advisor.cli import AdviseConfig


def _advice(**kw):
    cfg = AdviseConfig(hardware="h200-nvswitch", model="gpt-124m", global_batch=64, **kw)
    cfg.gpus = cfg.gpus or 8
    return answer.advise(cfg, hardware.get("h200-nvswitch"))


def test_answer_lines_name_the_recommendation_and_the_deciding_number():
    lines = render.answer_lines(_advice())
    assert 1 <= len(lines) <= 5 and lines[0].startswith("answer: ") and " ms per step" in lines[0]
    assert lines[1].startswith("why: ") and "GiB reserved of 139.8 GiB" in lines[1]


def test_json_and_records_carry_every_row():
    advice = _advice()
    rows = render.advice_records(advice)
    data = json.loads(render.json_text(advice, rows))
    assert len(data["advice"]) == len(advice.plans) and data["answer"] == render.answer_lines(advice)
    assert all(r["memory_reserved_bytes"] >= r["memory_allocated_bytes"] for r in data["advice"])


def test_nothing_fits_says_what_to_try():
    cfg = AdviseConfig(hardware="h200-nvswitch", params=1e13, gpus=8)
    lines = render.answer_lines(answer.advise(cfg, hardware.get("h200-nvswitch")))
    assert lines[0].startswith("answer: nothing fits") and "shard" in lines[1]
