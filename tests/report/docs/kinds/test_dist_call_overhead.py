"""``dist-call-overhead``: per op, the added host µs and lowest ratios; then the file's summary lines."""

from __future__ import annotations

from gpucomm.report.docs.kinds import KINDS


def test_reads_its_table_and_summary_lines(tmp_path):
    head = ("| op | size | raw host µs | plain host µs | plain +µs | prepared host µs | prepared +µs | plain/raw | "
            "prepared/raw | raw device µs | prepared device µs | plain/raw dev | prepared/raw dev |")
    text = "\n".join([
        "# command: python benchmarks/dist_call_overhead.py", "", head, "|" + "---|" * 13,
        "| gather | 8 B | 10 | 10.5 | +0.48 | 10 | +0.1 | 0.981 | 0.990 | 10 | 10 | 0.981 | 0.989 |",
        "| gather | 64 B | 10 | 13 | +3.15 | 11 | +1.35 | 0.894 | 0.957 | 10 | 11 | 0.891 | 0.957 |",
        "", "# prepared/raw (dev time), worst cell: 0.957 (gather, 64 B); target >= 0.97", ""])
    path = tmp_path / "dist-call-overhead_x_2026-12-03.txt"
    path.write_text(text)
    out = KINDS["dist-call-overhead"].render(path, {})
    (line,) = [x for x in out.splitlines() if x.startswith("| gather")]
    assert "+3.15 at 64 B" in line and "0.957 at 64 B" in line and line.rstrip(" |").endswith("64 B: 0.957")
    assert "- prepared/raw (dev time), worst cell: 0.957 (gather, 64 B); target >= 0.97" in out
