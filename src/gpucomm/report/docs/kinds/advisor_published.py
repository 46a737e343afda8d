"""``advisor-published``: benchmarks/advisor_published.py .txt: tables, summary."""

from __future__ import annotations

from pathlib import Path

from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/advisor_published.py`` output: its Markdown tables as they are, each table's caption line,
    and the summary lines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    prev = ""
    for i, line in enumerate(lines):
        nxt = next((x for x in lines[i + 1:] if x.strip()), "")
        if line.startswith("|"):
            kind, text = "table", line
        elif line.strip().startswith(("summary:", "of which")):
            kind, text = "summary", f"- {line.strip()}"
        elif line.strip().endswith(":") and nxt.startswith("|"):
            kind, text = "caption", line.strip()
        else:
            continue
        if out and (kind != prev or kind == "caption"):
            out.append("")
        out.append(text)
        prev = kind
    return "\n".join(out)


KIND = Kind("advisor-published", "benchmarks/advisor_published.py .txt: tables, summary", render)
