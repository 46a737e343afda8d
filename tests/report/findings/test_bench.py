"""Bench findings: per op and backend pair, from trusted rows only; the answer in at most five lines."""

from __future__ import annotations

from pathlib import Path

from report_records import bench, env

from gpucomm.records import ResultSet
from gpucomm.report.findings import bench as findings
from gpucomm.report.runs import Run


def _run(rows, device_type: str = "cuda") -> Run:
    return Run("label", Path("."), ResultSet(env=[env(device_type=device_type)], bench=rows))


def _pair(op: str, speedups: dict[int, float], backend: str = "gpucomm.comm", base: str = "torch.cuda.comm",
          **kw) -> list:
    rows = []
    for size, speedup in speedups.items():
        rows.append(bench(op, base, size, time_us=10.0, **kw))
        rows.append(bench(op, backend, size, time_us=10.0 / speedup, speedup=speedup, baseline=base, **kw))
    return rows


def _one(rows) -> findings.PairFinding:
    (f,) = findings.bench_findings(rows)
    return f


def test_faster_from_a_size_up():
    f = _one(_pair("gather", {1 << 10: 0.8, 1 << 20: 30.0, 1 << 26: 40.0}))
    assert (f.verdict, f.faster_from, f.speedup) == ("faster from", 1 << 20, 35.0)
    assert f.phrase() == "gather 35.00x from 1 MiB up (0.80x below)"
    assert f.sentence() == ("gather, gpucomm.comm vs torch.cuda.comm: faster from 1 MiB up, slower below — median "
                            "speedup 35.00x there (30.00–40.00x over 2 sizes).")


def test_faster_slower_on_par_and_mixed():
    fast = _one(_pair("broadcast", {8: 1.5, 1 << 20: 2.5}))
    slow = _one(_pair("scatter", {8: 0.5, 1 << 20: 0.5}))
    even = _one(_pair("reduce", {8: 0.98, 1 << 20: 1.02}))
    mixed = _one(_pair("all_gather", {8: 1.2, 1 << 10: 0.8, 1 << 20: 0.9}))
    assert [x.verdict for x in (fast, slow, even, mixed)] == ["faster", "slower", "on par", "mixed"]
    assert "faster at every size measured — median speedup 2.00x (1.50–2.50x over 2 sizes)" in fast.sentence()
    assert "slower at every size measured — median speedup 0.50x" in slow.sentence()
    assert "on par (within 3%)" in even.sentence()
    assert mixed.phrase() == "all_gather 0.80–1.20x" and "faster at 1 of 3 sizes" in mixed.sentence()


def test_noisy_and_wrong_rows_are_left_out_counted_and_kept_for_the_plot():
    rows = _pair("all_gather", {8: 1.2, 1 << 10: 1.2, 1 << 20: 50.0})
    rows[-1].time_us_p99 = rows[-1].time_us_median * 10  # the 50x row is noisy
    rows[1].wrong = 3  # the 8 B gpucomm row is wrong
    f = _one(rows)
    assert (f.noisy, f.wrong) == (1, 1)
    assert f.by_size == ((1 << 10, 1.2),)
    assert f.untrusted_by_size == ((1 << 20, 50.0),)  # drawn hollow, never quoted
    assert "50" not in f.sentence().split(";")[0] and "1 noisy row left out" in f.sentence()
    trust = findings.trust_sentences([_run(rows)])
    assert [tone for tone, _ in trust] == ["warning", "warning"]
    assert "1 of 6 rows returned WRONG" in trust[0][1] and "1 of 6 rows are too noisy" in trust[1][1]


def test_a_noisy_baseline_row_discredits_its_ratio():
    rows = _pair("reduce", {8: 2.0, 1 << 10: 3.0})
    rows[0].time_us_p99 = rows[0].time_us_median * 5  # the baseline at 8 B
    f = _one(rows)
    assert f.by_size == ((1 << 10, 3.0),) and f.noisy == 1
    assert findings.noisy_rows(rows) == {0, 1}


def test_prepared_rows_are_their_own_pair():
    rows = _pair("broadcast", {8: 1.5})
    prepared = bench("broadcast", "gpucomm.comm", 8, time_us=5.0, speedup=2.0, baseline="torch.cuda.comm")
    prepared.form = "prepared"
    sentences = findings.pair_sentences([_run(rows + [prepared])])
    assert len(sentences) == 2 and sentences[1].startswith("broadcast, gpucomm.comm prepared vs torch.cuda.comm:")


def test_the_answer_says_trust_first_then_one_line_per_pair():
    rows = (_pair("gather", {8: 2.0, 1 << 20: 3.0}) + _pair("scatter", {8: 0.5})
            + _pair("all_reduce", {8: 1.01}) + _pair("broadcast", {8: 1.5})[:1])
    noisy = _pair("reduce", {8: 4.0})
    noisy[1].time_us_p99 = noisy[1].time_us_median * 9
    rows += noisy + _pair("gather", {8: 1.2}, backend="gpucomm.dist", base="torch.distributed")
    lines = findings.bench_answer(rows)
    assert lines[0] == "answer: 13 rows, all checked correct; 1 too noisy to quote (p99 > 3x median: rerun on a quiet machine)"
    assert lines[1] == ("gpucomm.comm vs torch.cuda.comm: faster at gather 2.50x; slower at scatter 0.50x; "
                        "on par at all_reduce 1.01x; too noisy at reduce (1 of 5 rows left out as noisy)")
    assert lines[2] == "gpucomm.dist vs torch.distributed: faster at gather 1.20x"
    assert len(lines) == 3


def test_the_full_answer_keeps_every_pair_and_says_cpu_and_missing_baselines():
    rows = []
    for k, form in enumerate(("plain", "prepared", "graph")):
        for backend, base in (("gpucomm.comm", "torch.cuda.comm"), ("gpucomm.dist", "torch.distributed")):
            pair = _pair("gather", {8: 1.5 + k}, backend=backend, base=base)
            pair[1].form = form
            rows += pair if form == "plain" else pair[1:]
    lines = findings.bench_answer(rows)
    assert len(lines) == 7 and lines[2] == "gpucomm.comm prepared vs torch.cuda.comm: faster at gather 2.50x"
    cpu = [bench("gather", "gpucomm.comm", 8, device_type="cpu")]
    assert findings.bench_answer(cpu) == [
        "answer: 1 row, all checked correct; CPU numbers, not GPU performance",
        "gpucomm.comm: no speedup (its baseline, torch.cuda.comm, runs on CUDA only)"]
    assert findings.bench_answer([]) == []


# ----- the glance: the same findings in at most five screen lines --------------------------------------------
_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "gather", "scatter", "all_to_all")


def _full_run() -> list:
    """Eight ops x two backends x two forms, four sizes each: faster, slower, faster from 1 MiB up, mixed."""
    shapes = ({8: 1.4, 1 << 10: 1.5, 1 << 20: 1.6, 1 << 26: 1.7}, {8: 0.6, 1 << 10: 0.7, 1 << 20: 0.8, 1 << 26: 0.9},
              {8: 0.8, 1 << 10: 0.9, 1 << 20: 30.0, 1 << 26: 40.0}, {8: 1.2, 1 << 10: 0.8, 1 << 20: 1.3, 1 << 26: 0.7})
    rows = []
    for backend, base in (("gpucomm.comm", "torch.cuda.comm"), ("gpucomm.dist", "torch.distributed")):
        for form in ("plain", "prepared"):
            for i, op in enumerate(_OPS):
                pair = _pair(op, shapes[(i + (form == "prepared")) % 4], backend=backend, base=base)
                for r in pair[1::2]:
                    r.form = form
                rows += pair if form == "plain" else pair[1::2]
    rows[1].time_us_p99 = rows[1].time_us_median * 9  # one noisy row
    return rows


def test_the_glance_fits_five_screen_lines_at_any_width_and_keeps_the_findings():
    from gpucomm.report.findings import glance

    rows = _full_run()
    full = findings.bench_answer(rows)
    assert glance.screen_lines(full, 120) > 5  # every op of four pairs does not fit: the glance condenses
    for width in (80, 100, 120, 160):
        lines = findings.bench_glance(rows, width)
        assert glance.screen_lines(lines, width) <= 5, (width, lines)
        assert lines[0].startswith("answer: 192 rows") and "1 too noisy" in lines[0]
        text = " ".join(lines)
        assert "gpucomm.comm" in text and "gpucomm.dist" in text and "report.md" in text, lines
        assert "faster at" in text and "slower at" in text
    at80 = " ".join(findings.bench_glance(rows, 80))
    assert "faster at 4 of 8 ops, slower at 2, mixed at 2" in at80 and "(1 of 64 rows noisy)" in at80, at80
    # with more room: how much faster (the range), then the best ops with the size they are faster from
    assert "faster at 4 of 8 ops (1.55–35.00x), slower at 2 (0.75x)" in " ".join(findings.bench_glance(rows, 120))
    assert "faster at 4 of 8 ops (reduce_scatter 35.00x from 1 MiB up, …)" in " ".join(findings.bench_glance(rows, 160))
    wide = findings.bench_glance(rows, 1000)
    assert wide == full  # room for everything: the glance is the full answer


def test_the_speedup_range_is_in_numeric_order():
    rows = _pair("gather", {8: 9.0}) + _pair("scatter", {8: 10.5}) + _pair("reduce", {8: 0.5})
    assert findings._verdicts(findings.bench_findings(rows), 0) == ("faster at 2 of 3 ops (9.00–10.50x), "
                                                                   "slower at 1 (0.50x)")


def test_the_glance_names_the_report_only_when_one_was_written():
    rows = _full_run()
    assert "report.md" not in " ".join(findings.bench_glance(rows, 80, more=None))
    small = _pair("gather", {8: 2.0})
    assert findings.bench_glance(small, 80) == findings.bench_answer(small)  # short answers are whole
    assert findings.bench_glance([], 80) == []


def test_a_narrow_terminal_counts_the_backends_it_has_no_room_for():
    from gpucomm.report.findings import glance

    lines = findings.bench_glance(_full_run(), 30)
    assert glance.screen_lines(lines, 30) <= 5 or lines[-1].endswith("more backend: report.md)"), lines


def test_cpu_runs_say_so_in_the_trust_sentences():
    run = _run(_pair("all_reduce", {8: 1.1}, device_type="cpu"), device_type="cpu")
    assert any("CPU numbers" in text for _, text in findings.trust_sentences([run]))


def test_pairs_without_a_trusted_ratio_share_one_sentence():
    rows = _pair("gather", {8: 2.0}) + _pair("reduce", {8: 3.0}) + _pair("scatter", {8: 3.0})
    for r in rows[3::2]:
        r.time_us_p99 = r.time_us_median * 9  # reduce's and scatter's rows: noisy
    sentences = findings.pair_sentences([_run(rows)])
    assert len(sentences) == 2 and sentences[0].startswith("gather, gpucomm.comm vs torch.cuda.comm: faster")
    assert sentences[1] == ("No trustworthy ratio (every row too noisy or wrong): gpucomm.comm vs torch.cuda.comm "
                            "at reduce, scatter.")


def test_a_margin_within_three_percent_is_no_answer():
    assert _one(_pair("gather", {8: 1.0, 1 << 10: 1.01, 1 << 20: 1.05})).verdict == "on par"  # faster, by 1%
    assert _one(_pair("gather", {8: 0.95, 1 << 10: 0.99, 1 << 20: 0.98})).verdict == "on par"  # slower, by 2%
    weak = _one(_pair("gather", {8: 0.71, 1 << 10: 1.01, 1 << 20: 1.02}))
    assert weak.verdict == "mixed" and weak.phrase() == "gather 0.71–1.02x"  # "faster from 1 KiB up" by 1.5%
