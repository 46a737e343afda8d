"""The prose check: a measured figure needs a linked results file that contains it; bounds are not figures."""

from __future__ import annotations

import pytest

from gpucomm.report.docs import engine
from gpucomm.report.docs.prose import prose_problems

MARK = ("<!-- generated: ceilings from benchmarks/results/ceilings_x_2026-12-03.jsonl -->\n"
        "<!-- end generated -->\n")
LINK = "([c](../benchmarks/results/ceilings_x_2026-12-03.jsonl))"


@pytest.mark.parametrize(("prose", "expected"), [
    ("Pinned copies ran at 55.12 GB/s.", "has no source"),
    (f"Pinned copies ran at 55.12 GB/s {LINK}.", None),
    (f"Pinned copies ran at 55.1 GB/s {LINK}.", None),
    (f"Pinned copies ran at 57.3 GB/s {LINK}.", "57.3"),
    (f"It took 194 ms {LINK}.", "194"),  # 19.48 holds 19 but not 194
    ("It ran 3.5× faster ([c](../benchmarks/results/gone.jsonl)).", "not in the repository"),
    ("The target is ≥ 0.97× at every size, within 10% of the link.", None),
    ("Sizes 8 B – 1 GiB, step 4.", None),
])
def test_prose_figures_need_a_linked_file_that_contains_them(repo, prose, expected):
    doc = repo("# t\n\n" + MARK + "\n" + prose + "\n")
    problems = prose_problems(doc)
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and expected in problems[0], problems


def test_figures_inside_generated_blocks_and_code_are_not_prose(repo):
    doc = repo("# t\n\n" + MARK + "\n```text\nran at 99.9 GB/s\n```\n")
    engine.regenerate(doc)
    assert prose_problems(doc) == []
