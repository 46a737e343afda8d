"""Advice findings: the recommendation, its predicted step, throughput and memory, and the margin to the next."""

from __future__ import annotations

from report_records import advice, advice_rows

from gpucomm.report.findings import advice_findings
from gpucomm.report.findings.advice import said_answer


def test_the_first_ranked_strategy_and_why():
    (line,) = advice_findings(advice_rows())
    assert line == ("Recommended for gpt2 (124M parameters, global batch 64) on 1 node × 8 GPUs of h200-nvswitch: "
                    "zero1 — predicted step 67.4 ms, 950.0 samples/s, 20.00 GiB of 141.00 GiB per GPU; why: zero1: "
                    "reason text; 1 strategy does not fit in memory.")
    rows = advice_rows()
    for r in rows:
        r.reason = ""
    (line,) = advice_findings(rows)  # no reason recorded: the runner-up's step says the margin
    assert "; next, ddp: 71.1 ms (+5.6%); 1 strategy does not fit in memory." in line


def test_nothing_fits():
    (line,) = advice_findings([advice("zero3", None, fits=False), advice("ddp", None, fits=False)])
    assert line.startswith("Predicted for gpt2") and line.endswith("no strategy fits; 2 strategies do not fit in memory.")


def test_the_answer_advise_printed_is_the_one_the_report_says():
    from report_records import env

    said = ["answer: zero1 (dp8 zero1 mb8), 67.4 ms per step, 1,000 tokens/s per GPU",
            "why: 6% faster than the next, ddp at 71.1 ms; memory 20.0 GiB reserved of 141.0 GiB per GPU"]
    e = env()
    e.extra = {"advise": {"hardware": "h200-nvswitch", "answer": said}}
    assert said_answer([e]) == said
    assert said_answer([e, e]) == [] and said_answer([env()]) == []
    (line,) = advice_findings(advice_rows(), said)
    assert line == ("Recommended for gpt2 (124M parameters, global batch 64) on 1 node × 8 GPUs of h200-nvswitch: "
                    "zero1 (dp8 zero1 mb8), 67.4 ms per step, 1,000 tokens/s per GPU; why: 6% faster than the next, "
                    "ddp at 71.1 ms; memory 20.0 GiB reserved of 141.0 GiB per GPU; 1 strategy does not fit in memory.")
    other = advice("ddp", 1)
    other.model = "gpt-350m"
    assert len(advice_findings([*advice_rows(), other], said)) == 2  # two workloads: no one answer is theirs
    assert "reason text" in advice_findings([*advice_rows(), other], said)[0]
