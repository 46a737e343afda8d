"""``bench-forms``: a bench directory's forms summary, filtered by backend, sizes written with prefixes."""

from __future__ import annotations

from gpucomm.report.docs.kinds import KINDS


def test_filters_by_backend_and_names_sizes(tmp_path):
    (tmp_path / "forms-summary.txt").write_text(
        "# bench x: cuda\n# ratio = baseline plain median / this row's median, per size; floor 0.97\n"
        "backend        form      op              placement     sizes  median    min  below\n"
        "gpucomm.comm   prepared  reduce          in-place         11   1.445  0.882  8388608B:0.88\n"
        "gpucomm.dist   plain     send_recv       out-of-place     11   0.915  0.687  8B:0.81 512B:0.69\n"
        "# 2 rows, 0 with #wrong > 0\n")
    render = KINDS["bench-forms"].render
    out = render(tmp_path, {"backend": "gpucomm.comm"})
    assert "| gpucomm.comm | prepared | reduce | in-place | 11 | 1.445 | 0.882 | 8 MiB: 0.88 |" in out
    assert "gpucomm.dist" not in out
    assert "| 8 B: 0.81, 512 B: 0.69 |" in render(tmp_path / "forms-summary.txt", {})
