"""``train-vs-plain``: medians per side over rounds, and the file's summary ratios."""

from __future__ import annotations

from gpucomm.report.docs.kinds import KINDS

_VS_PLAIN = """\
# command: python benchmarks/train_vs_plain.py --rounds 2
round side      mean_ms median_ms  host_ms   gpu_ms  peak_GiB resident_GiB
    0 plain      10.000         -        -        -    2.000        1.0
    0 single     10.100     9.900    3.000    9.800    2.000        1.0
    1 single     10.300    10.100    5.000   10.000    2.100        1.0
    1 plain      10.200         -        -        -    2.100        1.0
# summary: median over rounds
single/plain time 1.010x (rounds: 1.010, 1.010; target <= 1.02); memory 1.000x (target <= 1.03)
"""


def test_medians_per_side_and_the_summary_ratios(tmp_path):
    path = tmp_path / "train-vs-plain_x_2026-12-03.txt"
    path.write_text(_VS_PLAIN)
    lines = KINDS["train-vs-plain"].render(path, {}).splitlines()
    assert lines[0].startswith("| side | rounds | window mean (ms)")
    assert lines[2] == "| plain | 2 | 10.100 | — | — | — | 2.050 | 1 (the baseline) | 1 (the baseline) |"
    assert lines[3] == "| single | 2 | 10.200 | 10.000 | 4.000 | 9.900 | 2.050 | 1.010x | 1.000x |"
