"""benchmarks/advisor_published.py: rows become CLI commands, the report and its summary line."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "advisor_published.py"
sys.path.insert(0, str(_PATH.parent))  # its sibling modules (_report)
_spec = importlib.util.spec_from_file_location("advisor_published", _PATH)
pub = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pub)

# Three rows in the published file's format (values as the sources publish them).
ROWS = [
    {"id": "mlm21-t2-ptdp-174.6b-384g", "model_name": "GPT 174.6B", "layers": 96, "hidden": 12288, "heads": 96,
     "kv_heads": None, "seq_len": 2048, "vocab": 51200, "gpu": "A100-SXM", "gpu_mem_gb": 80, "gpus_total": 384,
     "tp": 8, "pp": 12, "cp": 1, "vpp": None, "sharding": "none (PTD-P)", "micro_batch_per_gpu": 1,
     "global_batch_seqs": 1536, "activation_checkpointing": "full (Eq.3 accounting)", "reported": {},
     "derived": {"tokens_per_s_per_gpu": 106.7}},
    {"id": "tt24a-llama3-70b-64g", "model_name": "Llama 3 70B", "layers": 80, "hidden": 8192, "heads": 64,
     "kv_heads": 8, "seq_len": 8192, "vocab": 128256, "gpu": "A100", "gpu_mem_gb": 80, "gpus_total": 64,
     "tp": 1, "pp": 1, "cp": 1, "vpp": None, "sharding": "FSDP2 (full shard, 64)", "micro_batch_per_gpu": 1,
     "global_batch_seqs": 64, "activation_checkpointing": "full", "reported": {"wps_per_gpu": 331}},
    {"id": "mlm19-1.2b-1g", "model_name": "GPT-2 1.2B", "layers": 40, "hidden": 1536, "heads": 16,
     "kv_heads": None, "seq_len": None, "vocab": 51200, "gpu": "V100-SXM3", "gpu_mem_gb": 32, "gpus_total": 1,
     "tp": 1, "pp": 1, "cp": 1, "sharding": "none", "micro_batch_per_gpu": None, "global_batch_seqs": None,
     "activation_checkpointing": None, "reported": {"tflops_per_gpu": 39}},
]


def test_command_follows_the_cli_contract():
    argv, why = pub.command(ROWS[1])
    assert why == "" and argv[0] == "advise" and "--json" in argv
    layout = argv[argv.index("--layout") + 1]
    assert layout == "tp=1,pp=1,cp=1,shard=fsdp,mb=1,ac=full"
    assert "ffn=28672" in argv[argv.index("--arch") + 1]
    assert pub.command(ROWS[2])[0] is None and "TFLOP/s" in pub.command(ROWS[2])[1]


def test_script_runs_on_a_few_rows(tmp_path, capsys):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "report.txt"
    assert pub.main([str(path), "--out", str(out)]) == 0
    text = out.read_text()
    assert text == capsys.readouterr().out
    assert "| mlm21-t2-ptdp-174.6b-384g | 106.7 |" in text and "| tt24a-llama3-70b-64g | 331.0 |" in text
    summary = text.strip().splitlines()[-1]
    summary = [line for line in text.splitlines() if line.startswith("summary:")][0]
    assert summary.startswith("summary: 2 rows evaluated of 3; issue 11's targets over every evaluated row")
    assert "within 25%: " in summary and "called infeasible: 0" in summary
    assert "mlm19-1.2b-1g" in text.split("Not evaluated:")[1]


def test_tflops_row_is_evaluated_where_the_source_states_the_sequence_length():
    row = {**ROWS[2], "family": "Megatron-LM 2019 (Shoeybi et al., arXiv:1909.08053)", "source": "arXiv:1909.08053"}
    argv, why = pub.command(row)
    assert why == "" and "seq=1024" in argv[argv.index("--arch") + 1]
    assert argv[argv.index("--hardware") + 1] == "v100-dgx2h" and argv[argv.index("--gpus") + 1] == "1"
    assert argv[argv.index("--global-batch") + 1] == "8" and "ac=full" in argv[argv.index("--layout") + 1]
    name, published, factor = pub.metric(row)
    # The 2019 rows count 8 N per token: N = 40 (12 * 1536^2 + 13 * 1536) + 51200 * 1536 + 1024 * 1536
    # + 2 * 1536 = 1,213,479,936 (by hand), 8 N = 9.7079e9; the v1.0 page's 62.4e12 * 1.288 / 8192 = 9.811e9
    assert (name, published) == ("TFLOP/s/GPU", 39)
    assert factor == pytest.approx(8 * 1_213_479_936 / 1e12)
    assert factor * 1e12 / (62.4e12 * 1.288 / 8192) == pytest.approx(0.9895, abs=1e-3)
    # Eq. 3 (96 l h^2 (1 + s/6h + V/16lh)) stays the count of other TFLOP/s rows
    assert pub.flops_per_token({**row, "family": "other"}, 1024)[0] == pytest.approx(
        96 * 40 * 1536**2 * (1 + 1024 / (6 * 1536) + 51200 / (16 * 40 * 1536)))
    assert argv[argv.index("--kernels") + 1] == "unfused"
    res = pub.evaluate([row])[0]
    assert res["feasible"] and res["metric"] == "TFLOP/s/GPU" and res["error_frac"] > 0
    # the kernels x count table: the row's own prediction is its "unfused, 8N" cell, fused is faster
    table = pub.ablation([row])
    cells = next(line for line in table if line.startswith("| mlm19-1.2b-1g |")).strip("| ").split(" | ")[1:]
    assert cells[3] == f"{res['error_frac']:+.1%}"
    assert float(cells[0].rstrip("%")) > float(cells[2].rstrip("%")) and float(cells[2].rstrip("%")) > \
        float(cells[3].rstrip("%"))


def test_kernels_come_from_the_rows_own_fields():
    assert pub.kernels({"source": "arXiv:1909.08053", "other_opts": None}) == "unfused"
    assert pub.kernels({"source": "arXiv:1910.02054 (SC20)", "other_opts": "Megatron-LM (Sept 2019) MP"}) == \
        "unfused"
    # SC21's Megatron rows name their fused kernels; a 2021 paper without that note is fused by its date
    assert pub.kernels({"source": "arXiv:2104.04473 (SC21)", "other_opts": "Megatron fused kernels; PTD-P"}) == \
        "fused"
    assert pub.kernels({"source": "arXiv:2104.04473 (SC21)", "other_opts": "ZeRO-3 via DeepSpeed library"}) == \
        "fused"
    assert pub.kernels({"source": "arXiv:1909.08053", "other_opts": "flash attention"}) == "fused"
    assert pub.kernels({"source": "mosaicml/llm-foundry README", "other_opts": None}) == "fused"
    assert "--kernels" not in pub.command(ROWS[1])[0]


def test_unreadable_file_is_a_usage_error(tmp_path, capsys):
    assert pub.main([str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


@pytest.mark.skipif(not pub.DEFAULT.exists(), reason="the published-training file is outside the repository")
def test_the_published_file_evaluates_without_errors():
    rows = [json.loads(line) for line in pub.DEFAULT.read_text().splitlines() if line.strip()]
    results = pub.evaluate(rows)
    assert all("error" not in r for r in results)


def test_the_holdout_file_runs_through_the_cli_contract():
    rows = [json.loads(line) for line in pub.HOLDOUT.read_text().splitlines() if line.strip()]
    assert len(rows) >= 15 and all(r.get("source") for r in rows)
    results = pub.evaluate(rows)
    # every published run is evaluated, and its own layout is representable and feasible
    assert all(r.get("argv") for r in results), [r["skip"] for r in results if not r.get("argv")]
    assert all(r.get("feasible") for r in results), [(r["id"], r.get("error")) for r in results
                                                     if not r.get("feasible")]
    text = pub.report(results, pub.HOLDOUT, 0.0, [str(pub.HOLDOUT)])
    assert "issue 16's targets" in text and "(target <= 12%)" in text
    # uneven stages with virtual stages counting the embedding and the head (Llama 3 405B) are kept as given
    llama = next(r for r in results if r["id"] == "llama3-405b-8192g")
    assert llama["layout"]["stages"][0] == 7 and llama["layout"]["vpp"] == 8


def test_the_rows_software_stack_is_passed_where_its_source_states_one():
    llama3 = {"id": "llama3-x", "family": "Llama 3 paper (Meta, 2024)", "model_name": "Llama 3 405B",
              "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "ffn": 53248, "seq_len": 8192,
              "vocab": 128256, "gpu": "H100", "gpu_mem_gb": 80, "gpus_total": 16384, "gpus_per_node": 8,
              "tp": 8, "pp": 16, "cp": 1, "vpp": 8, "global_batch_seqs": 2048, "reported": {"tflops_per_gpu": 400}}
    argv = pub.command(llama3)[0]
    assert argv[argv.index("--software") + 1] == "fused"
    # LLM Foundry and torchtitan ran eager PyTorch modules: the default, so no flag
    mpt = dict(ROWS[1], family="MosaicML llm-foundry MPT benchmarks", gpu="H100")
    assert "--software" not in pub.command(mpt)[0] and "--software" not in pub.command(ROWS[1])[0]


def test_software_ablation_prices_each_measured_row_both_ways(monkeypatch):
    h100 = dict(ROWS[1], id="h100-row", gpu="H100", family="torchtitan")
    seen = []

    def fake_cli(argv):
        seen.append(argv[argv.index("--software") + 1])
        tps = {"eager": 331.0, "fused": 662.0}[seen[-1]]
        return 0, json.dumps({"advice": [{"tokens_per_s_per_gpu": tps}]}), ""

    monkeypatch.setattr(pub, "run_cli", fake_cli)
    lines = pub.software_ablation([ROWS[1], h100])  # the A100 row is datasheet-priced: left out
    assert seen == ["eager", "fused"]
    assert lines[-1] == "| h100-row | +0.0% | +100.0% | eager |"
