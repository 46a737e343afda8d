"""Measured tables in ``docs/*.md``, generated from the results files they quote — and checked stale.

How to use it (for every doc owner)
===================================

1. Put the measurement in a results file under ``benchmarks/results/`` named
   ``<theme>_<hardware>_<date>.<ext>`` (a bench/train result directory, a ``.jsonl``, a ``.md`` table) that
   says the command that produced it.
2. In the doc, where the table goes, write the two markers and nothing between them::

       <!-- generated: bench-pairs from benchmarks/results/bench_h200x1_2026-12-02 -->
       <!-- end generated -->

   ``bench-pairs`` is a block kind (the registry :data:`RENDERERS` below; ``python -m
   gpucomm.report.docs --kinds`` lists them).  Options follow the path as ``key=value`` words, e.g.
   ``ops=broadcast,scatter``.
3. Run ``python -m gpucomm.report.docs`` (or ``gpucomm report --doc docs/``): every block is
   rewritten from its file.  ``--check`` rewrites nothing and exits 1 when a block is stale, which is
   what ``tests/docs/test_generated.py`` runs in CI.
4. Prose that quotes a measured figure (a number with ×/x, %, ms, µs, GB/s, GiB, tokens/s or
   samples/s) carries a link ``[...](../benchmarks/results/FILE)`` in the same paragraph, and the
   number appears, as written, in one of the files that paragraph links.  Bounds and targets
   ("≥ 0.97×", "within 10%", "below 0.97×") are not figures: a number right after ≥, ≤, <, >, ~,
   "within", "at least", "at most", "under", "over", "below" or "above" is skipped, and so is a whole
   number of GiB (a size, not a measured amount of memory).  A number matches the file when it occurs
   there as a whole number or a prefix of a longer decimal (48.49 matches 48.49302…), commas ignored.
   Derived figures (a percentage change, a range over rows) belong in a generated block, not in prose.
   The rule applies to every doc that has at least one generated block.

Adding a block kind: write ``def _render_<kind>(path, options) -> str`` returning Markdown, and add it
to :data:`RENDERERS` with a one-line description.  Renderers read the results file and nothing else.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gpucomm.report._format import fmt_bytes, fmt_float

__all__ = ["RENDERERS", "Block", "DocError", "blocks", "check", "main", "prose_problems", "regenerate"]

_BEGIN = re.compile(r"^<!-- generated: (?P<kind>[a-z0-9-]+) from (?P<path>\S+)(?P<opts>(?: [a-z_]+=\S+)*) -->$")
_END = "<!-- end generated -->"


class DocError(ValueError):
    """A marker that names an unknown kind or a missing file, or a block that is not closed."""


@dataclass(frozen=True, slots=True)
class Block:
    """One generated block: where it is, what made it, and what it holds now."""

    doc: Path
    line: int
    """1-based line of the opening marker."""
    kind: str
    source: str
    """The results path as written in the marker (relative to the repository root)."""
    options: dict[str, str]
    body: str
    """The text between the markers, as it is in the doc."""


def _root(doc: Path) -> Path:
    """The repository root: the directory above ``docs/``."""
    return doc.resolve().parent.parent


def blocks(doc: Path) -> Iterator[Block]:
    """Every generated block of ``doc``, in order."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _BEGIN.match(lines[i].strip())
        if m is None:
            if lines[i].strip().startswith("<!-- generated"):
                raise DocError(f"{doc}:{i + 1}: malformed marker {lines[i].strip()!r}; expected "
                               f"'<!-- generated: KIND from benchmarks/results/FILE [key=value ...] -->'")
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == _END), None)
        if end is None:
            raise DocError(f"{doc}:{i + 1}: generated block is not closed; add '{_END}' after it")
        options = dict(opt.split("=", 1) for opt in m.group("opts").split())
        yield Block(doc, i + 1, m.group("kind"), m.group("path"), options, "\n".join(lines[i + 1:end]))
        i = end + 1


def render(block: Block) -> str:
    """The text a block should hold, rendered from its results file."""
    if block.kind not in RENDERERS:
        raise DocError(f"{block.doc}:{block.line}: unknown block kind {block.kind!r}; known kinds: "
                       f"{', '.join(sorted(RENDERERS))}")
    path = _root(block.doc) / block.source
    if not block.source.startswith("benchmarks/results/") or not path.exists():
        raise DocError(f"{block.doc}:{block.line}: {block.source} does not exist; a generated block must name a "
                       f"results file under benchmarks/results/ that is in the repository")
    text = RENDERERS[block.kind][0](path, block.options).strip()
    return f"\n{text}\n"


def regenerate(doc: Path) -> bool:
    """Rewrite every generated block of ``doc`` from its file; True when the file changed."""
    old = doc.read_text(encoding="utf-8")
    lines = old.splitlines()
    for block in reversed(list(blocks(doc))):
        start = block.line  # index of the line after the opening marker
        end = start + (len(block.body.splitlines()) if block.body else 0)
        lines[start:end] = render(block).splitlines()
    new = "\n".join(lines) + ("\n" if old.endswith("\n") else "")
    if new != old:
        doc.write_text(new, encoding="utf-8")
    return new != old


def check(doc: Path) -> list[str]:
    """One line per stale block of ``doc`` (empty when every block matches its file)."""
    return [f"{b.doc}:{b.line}: {b.kind} from {b.source} is stale; run python -m gpucomm.report.docs"
            for b in blocks(doc) if b.body.strip() != render(b).strip()]


# ----- prose figures ----------------------------------------------------------------------------------------
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
        if _BEGIN.match(stripped):
            skip = True
        if fence or skip:
            if stripped == _END:
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
    root = _root(doc)
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


# ----- renderers ------------------------------------------------------------------------------------------
def _md_table(headers: list[str], rows: list[list[str]], numeric: list[bool]) -> str:
    align = ["---:" if n else "---" for n in numeric]
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _range(values: list[float], digits: int = 2) -> str:
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    return fmt_float(lo, digits) if fmt_float(lo, digits) == fmt_float(hi, digits) else \
        f"{fmt_float(lo, digits)}–{fmt_float(hi, digits)}"


def _render_ceilings(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/ceilings.py`` rows: what was copied and its GB/s."""
    rows = [[r["what"], fmt_float(r["gbps"], 1)] for r in _jsonl(path)]
    return _md_table(["what", "GB/s"], rows, [False, True])


def _render_comm_vs_torch(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/comm_vs_torch.py`` rows: per op, the smallest ratio, the range from 64 MiB up, points below 0.97."""
    by_op: dict[str, list[dict]] = defaultdict(list)
    for r in _jsonl(path):
        if r.get("kind") == "comm_vs_torch":
            by_op[r["op"]].append(r)
    rows = []
    for op, rs in by_op.items():
        rs.sort(key=lambda r: r["size_bytes"])
        low = min(rs, key=lambda r: r["ratio"])
        large = [r["ratio"] for r in rs if r["size_bytes"] >= 64 << 20]
        below = [f"{fmt_bytes(r['size_bytes'])}: {r['ratio']:.3f}" for r in rs if r["ratio"] < 0.97]
        rows.append([op, str(len(rs)), f"{low['ratio']:.3f} at {fmt_bytes(low['size_bytes'])}", _range(large, 3),
                     ", ".join(below) or "none", _checked(rs)])
    return _md_table(["op", "sizes", "smallest ratio", "ratio at ≥ 64 MiB", "points below 0.97", "checked"],
                     rows, [False, True, True, True, False, False])


def _checked(rows: list[dict]) -> str:
    """"all 13 correct (2 not checked)", or how many were WRONG."""
    wrong = sum(r.get("correct") is False for r in rows)
    unchecked = sum(r.get("correct") is None for r in rows)
    text = f"{wrong} WRONG" if wrong else f"all {len(rows) - unchecked} correct"
    return text + (f" ({unchecked} not checked)" if unchecked else "")


def _render_bench_pairs(path: Path, options: dict[str, str]) -> str:
    """A ``gpucomm bench`` result directory: per op and backend pair, speedups below 1 MiB and from 64 MiB up."""
    from gpucomm.records import load

    ops = options.get("ops", "").split(",") if options.get("ops") else None
    rows_by: dict[tuple, list] = defaultdict(list)
    for r in load(path).bench:
        if r.speedup is None or r.baseline in (None, r.backend) or r.wrong > 0:
            continue
        if ops is None or r.op in ops:
            rows_by[(r.op, r.backend, r.form, r.baseline)].append(r)
    rows = []
    for (op, backend, form, baseline), rs in rows_by.items():
        small = [r.speedup for r in rs if r.size < 1 << 20]
        large = [r for r in rs if r.size >= 64 << 20]
        low = min(large, key=lambda r: r.speedup) if large else None
        rows.append([op, backend + ("" if form == "plain" else f" ({form})"), baseline, str(len(rs)),
                     fmt_float(statistics.median(small)) if small else "—",
                     _range([r.speedup for r in large]),
                     f"{low.speedup:.2f} ({low.placement}, {fmt_bytes(low.size)})" if low else "—"])
    return _md_table(["op", "backend", "baseline", "rows", "median < 1 MiB", "range ≥ 64 MiB", "lowest ≥ 64 MiB"],
                     rows, [False, False, False, True, True, True, False])


def _render_train(path: Path, options: dict[str, str]) -> str:
    """A ``gpucomm train`` result directory: one row per strategy."""
    from gpucomm.records import load

    rows = []
    for r in load(path).train:
        peak = f"{max(r.peak_mem_bytes) / (1 << 30):.2f}" if r.peak_mem_bytes else "—"
        equal = "—" if r.equal_to_single is None else ("yes" if r.equal_to_single else "NO")
        rows.append([r.strategy, ", ".join(dict.fromkeys(r.devices)) + (f" × {len(r.devices)}" if len(r.devices) > 1
                                                                          else ""),
                     fmt_float(r.samples_per_s, 1), fmt_float(r.tokens_per_s, 0),
                     f"{fmt_float(r.step_ms_median, 1)} / {fmt_float(r.step_ms_p90, 1)}", peak,
                     fmt_float(r.comm_ms_median), fmt_float(r.host_ms_per_device, 3), equal])
    return _md_table(["strategy", "devices", "samples/s", "tokens/s", "step median / p90 (ms)", "peak memory (GiB)",
                      "all-reduce (ms)", "host ms per device", "equal to single"],
                     rows, [False, False, True, True, True, True, True, True, False])


def _md_rows(path: Path) -> tuple[list[str], list[list[str]]]:
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


def _render_ratio_summary(path: Path, options: dict[str, str]) -> str:
    """A Markdown results table with ``ratio`` columns: per first-column value, each ratio's range over rows."""
    headers, rows = _md_rows(path)
    ratio_cols = [i for i, h in enumerate(headers) if "ratio" in h.lower()]
    names = [headers[i] if headers[i].lower() != "ratio" else f"{headers[i - 1].split(' (')[0]} ratio"
             for i in ratio_cols]
    groups: dict[str, list[list[str]]] = defaultdict(list)
    for r in rows:
        groups[r[0]].append(r)
    out = []
    for key, rs in groups.items():
        cells = [key, str(len(rs))]
        for i in ratio_cols:
            values = [float(r[i]) for r in rs if re.fullmatch(r"[\d.]+", r[i])]
            cells.append(_range(values, 3))
        out.append(cells)
    return _md_table([headers[0], "rows", *(f"{n} (min–max)" for n in names)], out,
                     [False, True, *([True] * len(ratio_cols))])


def _render_communicator_overhead(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/communicator_overhead.py`` .jsonl: per op, the plain and prepared ratios to torch.cuda.comm
    (minimum and median over sizes), the host µs a plain call adds over torch, and the prepared cells below 0.97."""
    by_op: dict[str, list[dict]] = defaultdict(list)
    for r in _jsonl(path):
        if r.get("kind") == "row":
            by_op[r["op"]].append(r)
    rows = []
    for op, rs in by_op.items():
        rs.sort(key=lambda r: r["size_bytes"])
        added = [r["plain_us"] - r["torch_us"] for r in rs]
        worst = max(range(len(rs)), key=lambda i: added[i])
        plain = [r["plain_ratio"] for r in rs]
        prepared = [r["prepared_ratio"] for r in rs]
        below = [f"{fmt_bytes(r['size_bytes'])}: {r['prepared_ratio']:.3f}" for r in rs if r["prepared_ratio"] < 0.97]
        over = [fmt_bytes(r["size_bytes"]) for r, a in zip(rs, added, strict=True) if a > 2]
        rows.append([op, str(len(rs)), f"{min(plain):.3f} / {statistics.median(plain):.3f}",
                     f"{min(prepared):.3f} / {statistics.median(prepared):.3f}", ", ".join(below) or "none",
                     f"{statistics.median(added):+.2f}", f"{added[worst]:+.2f} at {fmt_bytes(rs[worst]['size_bytes'])}",
                     f"{len(over)} ({', '.join(over)})" if over else "0"])
    return _md_table(["op", "sizes", "plain ratio min / median", "prepared ratio min / median",
                      "prepared below 0.97", "plain − torch µs, median", "plain − torch µs, most",
                      "sizes where plain adds > 2 µs"],
                     rows, [False, True, True, True, False, True, True, False])


def _render_dist_call_overhead(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/dist_call_overhead.py`` .txt: per op, the host µs a plain call adds (median, most), the lowest
    prepared/raw ratio (device and host time), the prepared cells below 0.97; then the file's summary lines."""
    headers, table = _md_rows(path)
    col = {h: i for i, h in enumerate(headers)}
    by_op: dict[str, list[list[str]]] = defaultdict(list)
    for r in table:
        by_op[r[col["op"]]].append(r)

    def low(rs: list[list[str]], name: str) -> str:
        r = min(rs, key=lambda r: float(r[col[name]]))
        return f"{r[col[name]]} at {r[col['size']]}"

    rows = []
    for op, rs in by_op.items():
        added = [float(r[col["plain +µs"]]) for r in rs]
        most = max(rs, key=lambda r: float(r[col["plain +µs"]]))
        below = [f"{r[col['size']]}: {r[col['prepared/raw dev']]}" for r in rs if float(r[col["prepared/raw dev"]]) < 0.97]
        rows.append([op, str(len(rs)), f"{statistics.median(added):+.2f}", f"{most[col['plain +µs']]} at {most[col['size']]}",
                     low(rs, "plain/raw dev"), low(rs, "prepared/raw dev"), low(rs, "prepared/raw"),
                     ", ".join(below) or "none"])
    out = _md_table(["op", "sizes", "plain +µs, median", "plain +µs, most", "lowest plain/raw (device)",
                     "lowest prepared/raw (device)", "lowest prepared/raw (host)", "prepared/raw (device) below 0.97"],
                    rows, [False, True, True, True, True, True, True, False])
    lines = path.read_text(encoding="utf-8").splitlines()
    last = max(i for i, line in enumerate(lines) if line.startswith("|"))
    notes = [f"- {line.lstrip('# ').strip()}" for line in lines[last + 1:] if line.startswith("#")]
    return out + ("\n\nThe file's own summary lines:\n\n" + "\n".join(notes) if notes else "")


def _render_bench_forms(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/bench_forms.py`` summary (``forms-summary.txt`` in a bench directory): per backend, form, op
    and placement, the median and lowest ratio to the baseline's plain call and the sizes below 0.97
    [backend=name]."""
    source = path / "forms-summary.txt" if path.is_dir() else path
    rows = []
    for line in source.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or line.startswith("#") or parts[0] == "backend":
            continue
        backend, form, op, placement, sizes, median, low, *below = parts
        if options.get("backend") not in (None, backend):
            continue
        cells = []
        for cell in below:
            if cell == "-":
                continue
            size, ratio = cell.split(":")
            cells.append(f"{fmt_bytes(int(size.rstrip('B')))}: {ratio}")
        rows.append([backend, form, op, placement, sizes, median, low, ", ".join(cells) or "none"])
    return _md_table(["backend", "form", "op", "placement", "sizes", "median ratio", "lowest ratio",
                      "sizes below 0.97"], rows, [False, False, False, False, True, True, True, False])


def _render_md_table(path: Path, options: dict[str, str]) -> str:
    """The first Markdown table of a results file, as it is (optionally only ``cols=0,1,4``: 0-based columns)."""
    headers, rows = _md_rows(path)
    keep = list(range(len(headers)))
    if options.get("cols"):
        keep = [int(i) for i in options["cols"].split(",")]
    numeric = [all(re.fullmatch(r"[\d.,%×x—-]+", r[i] or "—") for r in rows) for i in keep]
    return _md_table([headers[i] for i in keep], [[r[i] for i in keep] for r in rows], numeric)


def _render_before_after(path: Path, options: dict[str, str]) -> str:
    """Interleaved before/after whitespace tables (``# ... before`` / ``# ... after`` blocks, first column a name):
    per row, the median of the first numeric column before and after, and the change."""
    tables: list[dict[str, float]] = []
    current: dict[str, float] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if line.startswith("#") or not parts:
            current = None
            continue
        if current is None:
            current = {}
            tables.append(current)
            continue  # the header line
        current[parts[0]] = float(parts[1])
    before = [t for k, t in enumerate(tables) if k % 2 == 0]
    after = [t for k, t in enumerate(tables) if k % 2 == 1]
    rows = []
    for name in before[0]:
        b = statistics.median(t[name] for t in before)
        a = statistics.median(t[name] for t in after)
        rows.append([name, fmt_float(b), fmt_float(a), f"{100 * (a - b) / b:+.0f}%"])
    return _md_table(["method", f"before (median of {len(before)})", f"after (median of {len(after)})", "change"],
                     rows, [False, True, True, True])


def _render_train_vs_plain(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/train_vs_plain.py`` output: per side, medians over rounds, and the summary ratios to plain."""
    rounds: dict[str, list[list[str]]] = defaultdict(list)
    ratios: dict[str, tuple[str, str]] = {}
    header: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or line.startswith("#"):
            continue
        if parts[0] == "round":
            header = parts
        elif header and len(parts) == len(header) and parts[0].isdigit():
            rounds[parts[1]].append(parts)
        elif m := re.match(r"(\w+)/plain time ([\d.]+x).*?memory ([\d.]+x)", line):
            ratios[m.group(1)] = (m.group(2), m.group(3))

    def med(rows: list[list[str]], col: str) -> str:
        values = [float(r[header.index(col)]) for r in rows if r[header.index(col)] != "-"]
        return fmt_float(statistics.median(values), 3) if values else "—"

    out = [[side, str(len(rs)), med(rs, "mean_ms"), med(rs, "median_ms"), med(rs, "host_ms"), med(rs, "gpu_ms"),
            med(rs, "peak_GiB"), *ratios.get(side, ("1 (the baseline)", "1 (the baseline)"))]
           for side, rs in rounds.items()]
    return _md_table(["side", "rounds", "window mean (ms)", "per-step median (ms)", "host (ms)", "GPU (ms)",
                      "peak (GiB)", "time vs plain", "memory vs plain"], out,
                     [False, True, True, True, True, True, True, True, True])


def _render_train_graphs(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/train_graphs.py`` .jsonl: per form and mode, host, launch and GPU time per replica-step."""
    rows = []
    for r in _jsonl(path):
        if "form" not in r:
            continue
        if r.get("status") != "ok":
            rows.append([r["form"], r["mode"], *(["—"] * 5), f"{r['status']}: {r.get('reason', '')}"])
            continue
        launch = r.get("launch_ms_per_replica")
        gpu = r.get("gpu_ms_per_replica")
        rows.append([r["form"], r["mode"], fmt_float(r["host_ms_per_replica"], 3),
                     "—" if launch is None else fmt_float(launch, 3), "—" if gpu is None else fmt_float(gpu, 2),
                     "—" if launch is None or not gpu else f"{launch / gpu:.4f}",
                     "—" if r.get("host_ratio") is None else f"{r['host_ratio']:.4f}",
                     "equal" if r.get("losses_match") else "DIFFER"])
    return _md_table(["form", "mode", "host (ms)", "launch (ms)", "GPU (ms)", "launch / GPU", "host / GPU", "losses"],
                     rows, [False, False, True, True, True, True, True, False])


def _render_train_host(path: Path, options: dict[str, str]) -> str:
    """A ``gpucomm train`` result directory: per strategy, step and GPU time, host time per step and per device."""
    from gpucomm.records import load

    rows = []
    for r in load(path).train:
        equal = "—" if r.equal_to_single is None else ("yes" if r.equal_to_single else "NO")
        host_gpu = (f"{r.host_ms_per_device / r.gpu_ms_median:.3f}"
                    if r.host_ms_per_device is not None and r.gpu_ms_median else "—")
        rows.append([r.strategy, f"{r.devices[0]} × {len(r.devices)}" if len(r.devices) > 1 else r.devices[0],
                     fmt_float(r.step_ms_median, 1), fmt_float(r.gpu_ms_median, 1), fmt_float(r.host_ms_median, 1),
                     fmt_float(r.host_ms_per_device, 1), host_gpu, equal])
    return _md_table(["strategy", "devices", "step median (ms)", "GPU (ms)", "host (ms)", "host per device (ms)",
                      "host per device / GPU", "equal to single"],
                     rows, [False, False, True, True, True, True, True, False])


def _render_advisor_published(path: Path, options: dict[str, str]) -> str:
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


RENDERERS: dict[str, tuple[Callable[[Path, dict[str, str]], str], str]] = {
    "ceilings": (_render_ceilings, "benchmarks/ceilings.py .jsonl: GB/s per copy kind"),
    "comm-vs-torch": (_render_comm_vs_torch, "benchmarks/comm_vs_torch.py .jsonl: per-op ratio summary"),
    "bench-pairs": (_render_bench_pairs, "gpucomm bench directory: speedup per op and backend pair [ops=a,b]"),
    "train": (_render_train, "gpucomm train directory: one row per strategy"),
    "ratio-summary": (_render_ratio_summary, ".md results table: per first column, the range of each ratio"),
    "communicator-overhead": (_render_communicator_overhead,
                              "benchmarks/communicator_overhead.py .jsonl: plain/prepared vs torch per op"),
    "dist-call-overhead": (_render_dist_call_overhead, "benchmarks/dist_call_overhead.py .txt: +µs and ratios per op"),
    "bench-forms": (_render_bench_forms, "bench directory's forms-summary.txt: ratio per form [backend=name]"),
    "md-table": (_render_md_table, ".md results file: its first table as is [cols=0,1,4]"),
    "before-after": (_render_before_after, "interleaved before/after text tables: medians and the change"),
    "train-vs-plain": (_render_train_vs_plain, "benchmarks/train_vs_plain.py .txt: medians per side, ratios to plain"),
    "train-graphs": (_render_train_graphs, "benchmarks/train_graphs.py .jsonl: host, launch, GPU per replica-step"),
    "train-host": (_render_train_host, "gpucomm train directory: step, GPU and host time per strategy"),
    "advisor-published": (_render_advisor_published, "benchmarks/advisor_published.py .txt: tables, summary"),
}
"""Block kind → (renderer, what it reads)."""


# ----- command line ---------------------------------------------------------------------------------------
def _docs(target: Path) -> list[Path]:
    return sorted(target.glob("*.md")) if target.is_dir() else [target]


def run(target: str | Path = "docs", *, check_only: bool = False) -> int:
    """Regenerate (or, with ``check_only``, check) every generated block under ``target``; exit status."""
    target = Path(target)
    if not target.exists():
        print(f"gpucomm report: error: --doc {str(target)!r} does not exist; pass the docs/ directory or a .md file",
              file=sys.stderr)
        return 2
    problems: list[str] = []
    try:
        for doc in _docs(target):
            if check_only:
                problems += check(doc)
            elif regenerate(doc):
                print(f"regenerated {doc}")
    except DocError as exc:
        print(f"gpucomm report: error: {exc}", file=sys.stderr)
        return 2
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m gpucomm.report.docs [DOCS] [--check] [--kinds]``."""
    parser = argparse.ArgumentParser(prog="python -m gpucomm.report.docs", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", nargs="?", default="docs", help="docs directory or one .md file (default docs)")
    parser.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 when a block is stale")
    parser.add_argument("--kinds", action="store_true", help="list the block kinds and what each reads")
    args = parser.parse_args(argv)
    if args.kinds:
        for kind, (_, what) in sorted(RENDERERS.items()):
            print(f"{kind:15} {what}")
        return 0
    return run(args.target, check_only=args.check)


if __name__ == "__main__":
    raise SystemExit(main())
