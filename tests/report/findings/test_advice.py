"""Advice findings: the recommendation, its predicted step, throughput and memory, and the margin to the next."""

from __future__ import annotations

from report_records import advice, advice_rows

from gpucomm.report.findings import advice_findings


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
