"""Train findings: the strategy to pick and why, and the equality verdict."""

from __future__ import annotations

from report_records import train, train_rows

from gpucomm.report.findings import train_findings


def test_the_fastest_equal_strategy_is_picked_against_the_runner_up():
    rows = train_rows()
    rows[3].max_loss_rel_diff = 3e-3  # ddp: different from single
    pick, equality = train_findings(rows)
    # ddp (185) differs from single, so replicated (190) is compared with the next usable one: dp (150)
    assert pick == ("Pick replicated for gpt-tiny on 2 GPUs: 190.0 samples/s, 1.27x the next best, dp on 2 "
                    "(150.0 samples/s); 95.0% scaling efficiency.")
    assert equality == ("Equality: dp and replicated (2 devices) computed what single did (loss and parameters "
                        "within 1e-05); ddp on 2 is DIFFERENT from single: relative difference 3.0e-03 > 1e-05; "
                        "dp on 4 not run (dp needs CUDA).")


def test_when_one_device_wins_it_says_data_parallelism_does_not_pay():
    rows = [train("single", 1, 100.0, eff=1.0), train("ddp", 2, 60.0, eff=0.3)]
    for r in rows:
        r.device_type, r.devices = "cpu", ["cpu"] * r.n_devices
    pick, _ = train_findings(rows)
    assert pick == ("Pick single for gpt-tiny: one device (100.0 samples/s) is faster than the best multi-device "
                    "strategy, ddp on 2 CPU devices (60.0 samples/s, 30.0% scaling efficiency) — data parallelism "
                    "does not pay on these devices.")


def test_failures_and_a_lone_single_run_are_said_plainly():
    failed = train("ddp", 2, 0.0, status="failed", note="RuntimeError: boom (rank 1); see the log")
    assert train_findings([train("single", 1, 100.0), failed])[1] == "Equality: ddp on 2 FAILED (RuntimeError: boom)."
    assert train_findings([train("single", 1, 100.0)])[1] == ("Equality: only single ran; there is nothing to "
                                                            "compare it with.")
    assert train_findings([failed])[0].endswith("nothing to pick (see the table).")
    assert train_findings([]) == []


def test_several_workloads_name_theirs():
    other = train("single", 1, 50.0)
    other.model = "gpt-small"
    lines = train_findings([train("single", 1, 100.0), other])
    assert len(lines) == 4 and lines[2].startswith("Only") is False
    assert lines[0].startswith("Pick single for gpt-tiny (fp32, global batch 32, sequence 128) on 1 GPU")


def test_a_margin_within_the_step_spread_or_superlinear_scaling_makes_the_pick_not_firm():
    single, ddp, replicated = train("single", 1, 70.0, eff=1.0), train("ddp", 2, 910.0, eff=6.3), train(
        "replicated", 2, 900.0, eff=6.2)
    replicated.step_ms_p90 = replicated.step_ms_median * 1.6
    pick, _ = train_findings([single, ddp, replicated])
    assert pick.startswith("Pick ddp for gpt-tiny on 2 GPUs: 910.0 samples/s, 1.01x the next best, replicated on 2 "
                           "(900.0 samples/s) — about even; 630.0% scaling efficiency.")
    assert pick.endswith(" Not firm: the 1.01x margin is within the steps' spread (replicated on 2's p90 step is "
                         "1.60x its median); 630.0% scaling efficiency means single's own steps were slowed — rerun "
                         "with more --steps on a quiet machine.")
    # a 2x margin is firm even when one side's steps spread 1.6x
    single, ddp = train("single", 1, 200.0, eff=1.0), train("ddp", 2, 100.0, eff=0.25)
    single.step_ms_p90 = single.step_ms_median * 1.6
    assert "Not firm" not in train_findings([single, ddp])[0]
    steady = train_findings([train("single", 1, 100.0, eff=1.0), train("ddp", 2, 150.0, eff=0.75)])[0]
    assert "Not firm" not in steady and "about even" not in steady


def test_a_scaling_efficiency_against_an_unsteady_single_is_not_firm():
    single, replicated, ddp = train("single", 1, 580.0, eff=1.0), train("replicated", 2, 980.0, eff=0.84), train(
        "ddp", 2, 790.0, eff=0.68)
    single.step_ms_p90 = single.step_ms_median * 5.7
    pick, _ = train_findings([single, replicated, ddp])
    assert pick.endswith("; 84.0% scaling efficiency. Not firm: its scaling efficiency is against single, whose p90 "
                         "step is 5.70x its median — rerun with more --steps on a quiet machine.")


def test_the_glance_fits_five_screen_lines_and_keeps_the_pick_and_the_verdict():
    from gpucomm.report.findings import glance, train_glance

    single, replicated, ddp = train("single", 1, 701.6, eff=1.0), train("replicated", 2, 902.2, eff=0.643), train(
        "ddp", 2, 690.0, eff=0.49)
    single.step_ms_p90 = single.step_ms_median * 28.7
    skipped = train("dp", 2, 0.0, status="not-applicable", note="torch.nn.DataParallel runs only on CUDA devices")
    rows = [single, replicated, ddp, skipped]
    full = train_findings(rows)
    assert glance.screen_lines(full, 80) > 5
    for width in (80, 120):
        pick, equality = train_glance(rows, width)
        assert glance.screen_lines([pick, equality], width) <= 5
        assert pick.startswith("Pick replicated for gpt-tiny on 2 GPUs: 902.2 samples/s, 1.29x single") and "Not firm" in pick
        assert equality.startswith("Equality: replicated and ddp (2 devices) computed what single did")
        assert "dp on 2 not run" in equality
    assert train_glance(rows, 1000) == full  # room for everything: the full findings
    assert "runs only on CUDA" in train_glance(rows, 120)[1]  # 120 columns keep the reason, 80 drop it
    assert "runs only on CUDA" not in train_glance(rows, 80)[1]
    assert train_glance([], 80) == []
