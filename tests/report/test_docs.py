"""Block kinds of :mod:`gpucomm.report.docs` for the train and advisor docs, on small synthetic results files.

(The markers, staleness and prose rules are tested in ``tests/docs/test_generated.py``.)
"""

from __future__ import annotations

import json
from pathlib import Path

from gpucomm.report import docs

ROOT = Path(__file__).resolve().parents[2]

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


def test_train_vs_plain_medians_per_side_and_the_summary_ratios(tmp_path):
    path = tmp_path / "train-vs-plain_x_2026-12-03.txt"
    path.write_text(_VS_PLAIN)
    lines = docs.RENDERERS["train-vs-plain"][0](path, {}).splitlines()
    assert lines[0].startswith("| side | rounds | window mean (ms)")
    assert lines[2] == "| plain | 2 | 10.100 | — | — | — | 2.050 | 1 (the baseline) | 1 (the baseline) |"
    assert lines[3] == "| single | 2 | 10.200 | 10.000 | 4.000 | 9.900 | 2.050 | 1.010x | 1.000x |"


def test_train_graphs_rows_with_launch_over_gpu_and_a_failed_form(tmp_path):
    rows = [{"env": {"command": "python benchmarks/train_graphs.py"}},
            {"form": "single", "mode": "graphs", "status": "ok", "host_ms_per_replica": 0.6,
             "launch_ms_per_replica": 0.7, "gpu_ms_per_replica": 40.0, "host_ratio": 0.015, "losses_match": True},
            {"form": "replicated x2", "mode": "graphs", "status": "failed", "reason": "capture failed"}]
    path = tmp_path / "train-graphs_x_2026-12-03.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = docs.RENDERERS["train-graphs"][0](path, {}).splitlines()
    assert lines[2] == "| single | graphs | 0.600 | 0.700 | 40.00 | 0.0175 | 0.0150 | equal |"
    assert lines[3].startswith("| replicated x2 | graphs | — |") and "failed: capture failed" in lines[3]


def test_train_host_reads_the_committed_h200_run():
    text = docs.RENDERERS["train-host"][0](ROOT / "benchmarks/results/train-host-r2_h200x1_2026-12-03", {})
    dp = next(line for line in text.splitlines() if line.startswith("| dp |"))
    assert dp == "| dp | cuda:0 × 2 | 137.3 | 137.3 | 140.6 | 70.3 | 0.512 | yes |"


def test_advisor_published_keeps_tables_captions_and_summary(tmp_path):
    path = tmp_path / "advisor-published_x_2026-12-03.txt"
    path.write_text("# title\n\ncommand: x\n\n| id | error |\n|---|---:|\n| a | +1.0% |\n\nNot evaluated:\n\n- b\n\n"
                    "summary: 1 rows; median 1.0%\n  of which 1 rows: fine\n\nSecond table:\n\n| row | e |\n"
                    "|---|---:|\n| c | 2 |\nother: line\n")
    text = docs.RENDERERS["advisor-published"][0](path, {})
    assert text == ("| id | error |\n|---|---:|\n| a | +1.0% |\n\n- summary: 1 rows; median 1.0%\n"
                    "- of which 1 rows: fine\n\nSecond table:\n\n| row | e |\n|---|---:|\n| c | 2 |")


# ----- issue 10's overhead benchmarks (performance.md §8.1) ----------------------------------------------
def _render(kind: str, path: Path, **options: str) -> str:
    return docs.RENDERERS[kind][0](path, options)


def test_communicator_overhead_reports_misses_and_added_host_time(tmp_path):
    rows = [{"kind": "header", "command": "python benchmarks/communicator_overhead.py"}]
    for size, torch_us, plain_us, prep_us in [(16, 10.0, 13.5, 9.0), (1 << 20, 10.0, 11.0, 10.5)]:
        rows.append({"kind": "row", "op": "scatter", "size_bytes": size, "torch_us": torch_us, "plain_us": plain_us,
                     "prepared_us": prep_us, "plain_ratio": round(torch_us / plain_us, 3),
                     "prepared_ratio": round(torch_us / prep_us, 3)})
    path = tmp_path / "communicator-overhead_x_2026-12-03.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (line,) = [x for x in _render("communicator-overhead", path).splitlines() if x.startswith("| scatter")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "2"
    assert cells[3].startswith("0.952 / ")  # the prepared minimum
    assert cells[4] == "1 MiB: 0.952"  # the one prepared cell below 0.97
    assert cells[6] == "+3.50 at 16 B"
    assert cells[7] == "1 (16 B)"  # only 16 B adds more than 2 µs


def test_dist_call_overhead_reads_its_table_and_summary_lines(tmp_path):
    head = ("| op | size | raw host µs | plain host µs | plain +µs | prepared host µs | prepared +µs | plain/raw | "
            "prepared/raw | raw device µs | prepared device µs | plain/raw dev | prepared/raw dev |")
    text = "\n".join([
        "# command: python benchmarks/dist_call_overhead.py", "", head, "|" + "---|" * 13,
        "| gather | 8 B | 10 | 10.5 | +0.48 | 10 | +0.1 | 0.981 | 0.990 | 10 | 10 | 0.981 | 0.989 |",
        "| gather | 64 B | 10 | 13 | +3.15 | 11 | +1.35 | 0.894 | 0.957 | 10 | 11 | 0.891 | 0.957 |",
        "", "# prepared/raw (dev time), worst cell: 0.957 (gather, 64 B); target >= 0.97", ""])
    path = tmp_path / "dist-call-overhead_x_2026-12-03.txt"
    path.write_text(text)
    out = _render("dist-call-overhead", path)
    (line,) = [x for x in out.splitlines() if x.startswith("| gather")]
    assert "+3.15 at 64 B" in line and "0.957 at 64 B" in line and line.rstrip(" |").endswith("64 B: 0.957")
    assert "- prepared/raw (dev time), worst cell: 0.957 (gather, 64 B); target >= 0.97" in out


def test_bench_forms_filters_by_backend_and_names_sizes(tmp_path):
    (tmp_path / "forms-summary.txt").write_text(
        "# bench x: cuda\n# ratio = baseline plain median / this row's median, per size; floor 0.97\n"
        "backend        form      op              placement     sizes  median    min  below\n"
        "gpucomm.comm   prepared  reduce          in-place         11   1.445  0.882  8388608B:0.88\n"
        "gpucomm.dist   plain     send_recv       out-of-place     11   0.915  0.687  8B:0.81 512B:0.69\n"
        "# 2 rows, 0 with #wrong > 0\n")
    out = _render("bench-forms", tmp_path, backend="gpucomm.comm")
    assert "| gpucomm.comm | prepared | reduce | in-place | 11 | 1.445 | 0.882 | 8 MiB: 0.88 |" in out
    assert "gpucomm.dist" not in out
    assert "| 8 B: 0.81, 512 B: 0.69 |" in _render("bench-forms", tmp_path / "forms-summary.txt")
