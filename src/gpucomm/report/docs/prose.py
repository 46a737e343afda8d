"""The prose check: a measured figure in a doc's prose must come from a results file its paragraph links.

A figure is a number with ×/x, %, ms, µs, GB/s, GiB, tokens/s or samples/s.  Bounds and targets ("≥ 0.97×",
"within 10%", "below 0.97×") are not figures: a number right after ≥, ≤, <, >, ~, "within", "target", "at
least", "at most", "under", "over", "below" or "above" is skipped, and so is a whole number of GiB (a size,
not a measured amount of memory).  A number matches a linked file when it occurs there as a whole number or
as the leading digits of a longer decimal (48.49 matches 48.49302…), commas ignored.  Text inside code
fences and generated blocks is not prose.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from gpucomm.report.docs.engine import BEGIN, END, repository_root

__all__ = ["prose_problems"]

_FIGURE = re.compile(r"(?<![\w.≥≤<>~])(?P<num>\d[\d,]*(?:\.\d+)?)(?:\s?(?:–|-)\s?(?P<num2>\d[\d,]*(?:\.\d+)?))?"
                     r"\s?(?P<unit>×|x\b|%|ms\b|µs\b|us\b|GB/s|GiB\b|tokens/s|samples/s)")
# a size ("1 GiB") is a parameter, a memory amount ("16.05 GiB") a measurement: GiB counts with decimals only
_BOUND = re.compile(r"(?:[≥≤<>~]|within|target|at least|at most|under|over|below|above)\s*$")
_LINK = re.compile(r"\]\((?:\.\./)?(benchmarks/results/[^)#\s]+)\)")


def _paragraphs(text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each paragraph outside code fences and generated blocks."""
    para: list[str] = []
    start = 0
    skip = fence = False
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = not fence
            continue
        if BEGIN.match(stripped):
            skip = True
        if fence or skip:
            if stripped == END:
                skip = False
            continue
        if not stripped or stripped.startswith("#"):
            if para:
                yield start, " ".join(para)
            para = []
            continue
        if not para:
            start = n
        para.append(stripped)
    if para:
        yield start, " ".join(para)


def prose_problems(doc: Path) -> list[str]:
    """Measured figures in ``doc``'s prose without a linked results file that contains them."""
    root = repository_root(doc)
    problems = []
    for line, text in _paragraphs(doc.read_text(encoding="utf-8")):
        figures = [m for m in _FIGURE.finditer(text) if not _BOUND.search(text[:m.start()])
                   and not (m.group("unit") == "GiB" and "." not in m.group("num"))]
        if not figures:
            continue
        links = _LINK.findall(text)
        sources = [root / link for link in links]
        missing = [str(s.relative_to(root)) for s in sources if not s.exists()]
        if missing:
            problems.append(f"{doc}:{line}: links {', '.join(missing)}, which is not in the repository")
            continue
        corpus = "\n".join(_text_of(s) for s in sources)
        for m in figures:
            for num in filter(None, (m.group("num"), m.group("num2"))):
                if not sources:
                    problems.append(f"{doc}:{line}: {m.group(0)!r} has no source: link the results file "
                                    f"([...](../benchmarks/results/FILE)) in its paragraph")
                elif not _occurs(num, corpus):
                    problems.append(f"{doc}:{line}: {num} (in {m.group(0)!r}) does not occur in "
                                    f"{', '.join(links)}")
    return problems


def _occurs(num: str, corpus: str) -> bool:
    """Whether ``num`` occurs in ``corpus`` as written, or as the leading digits of a longer decimal there."""
    plain = num.replace(",", "")
    tail = r"\d*" if "." in plain else r"(?![\d])"  # 48.49 is quoted from 48.49302…, but 48 is not 480
    pattern = rf"(?<![\d.]){re.escape(plain)}{tail}"
    return re.search(pattern, corpus.replace(",", "")) is not None


def _text_of(path: Path) -> str:
    """A results file's text (a directory: its records.jsonl and report.md)."""
    if path.is_dir():
        return "\n".join(p.read_text(encoding="utf-8", errors="replace")
                         for p in (path / "records.jsonl", path / "report.md") if p.is_file())
    return path.read_text(encoding="utf-8", errors="replace")
