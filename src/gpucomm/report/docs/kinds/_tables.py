"""Helpers the block kinds share: a Markdown table, a JSON Lines file, a range of values, a results file's table."""

from __future__ import annotations

import json
from pathlib import Path

from gpucomm.report._format import fmt_float
from gpucomm.report.docs.spec import DocError

__all__ = ["checked", "jsonl", "md_rows", "md_table", "value_range"]


def md_table(headers: list[str], rows: list[list[str]], numeric: list[bool]) -> str:
    align = ["---:" if n else "---" for n in numeric]
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def value_range(values: list[float], digits: int = 2) -> str:
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    return fmt_float(lo, digits) if fmt_float(lo, digits) == fmt_float(hi, digits) else \
        f"{fmt_float(lo, digits)}–{fmt_float(hi, digits)}"


def md_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """The first Markdown table of a results file: (headers, rows)."""
    table = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("|"):
            table.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif table:
            break
    if len(table) < 2:
        raise DocError(f"{path}: no Markdown table found")
    return table[0], [r for r in table[2:] if len(r) == len(table[0])]


def checked(rows: list[dict]) -> str:
    """"all 13 correct (2 not checked)", or how many were WRONG."""
    wrong = sum(r.get("correct") is False for r in rows)
    unchecked = sum(r.get("correct") is None for r in rows)
    text = f"{wrong} WRONG" if wrong else f"all {len(rows) - unchecked} correct"
    return text + (f" ({unchecked} not checked)" if unchecked else "")
