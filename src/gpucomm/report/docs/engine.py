"""The marker engine: find the generated blocks of a doc, render each from its results file, rewrite or check.

A block is the text between ``<!-- generated: KIND from benchmarks/results/FILE [key=value ...] -->`` and
``<!-- end generated -->``.  :func:`render` asks the block's kind (:data:`~gpucomm.report.docs.kinds.KINDS`)
for its Markdown; :func:`regenerate` writes it in place, :func:`check` only compares.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpucomm.report.docs.kinds import KINDS
from gpucomm.report.docs.spec import DocError

__all__ = ["BEGIN", "END", "Block", "blocks", "check", "regenerate", "render", "repository_root"]

BEGIN = re.compile(r"^<!-- generated: (?P<kind>[a-z0-9-]+) from (?P<path>\S+)(?P<opts>(?: [a-z_]+=\S+)*) -->$")
"""The opening marker of a generated block (matched against a stripped line)."""
END = "<!-- end generated -->"
"""The closing marker."""


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


def repository_root(doc: Path) -> Path:
    """The repository root: the directory above ``docs/``."""
    return doc.resolve().parent.parent


def blocks(doc: Path) -> Iterator[Block]:
    """Every generated block of ``doc``, in order."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = BEGIN.match(lines[i].strip())
        if m is None:
            if lines[i].strip().startswith("<!-- generated"):
                raise DocError(f"{doc}:{i + 1}: malformed marker {lines[i].strip()!r}; expected "
                               f"'<!-- generated: KIND from benchmarks/results/FILE [key=value ...] -->'")
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == END), None)
        if end is None:
            raise DocError(f"{doc}:{i + 1}: generated block is not closed; add '{END}' after it")
        options = dict(opt.split("=", 1) for opt in m.group("opts").split())
        yield Block(doc, i + 1, m.group("kind"), m.group("path"), options, "\n".join(lines[i + 1:end]))
        i = end + 1


def render(block: Block) -> str:
    """The text a block should hold, rendered from its results file."""
    kind = KINDS.get(block.kind)
    if kind is None:
        raise DocError(f"{block.doc}:{block.line}: unknown block kind {block.kind!r}; known kinds: "
                       f"{', '.join(KINDS)}")
    unknown = sorted(set(block.options) - set(kind.options))
    if unknown:
        allowed = ", ".join(kind.options) or "none"
        raise DocError(f"{block.doc}:{block.line}: {block.kind} takes no option {', '.join(unknown)}; "
                       f"its options: {allowed}")
    path = repository_root(block.doc) / block.source
    if not block.source.startswith("benchmarks/results/") or not path.exists():
        raise DocError(f"{block.doc}:{block.line}: {block.source} does not exist; a generated block must name a "
                       f"results file under benchmarks/results/ that is in the repository")
    text = kind.render(path, block.options).strip()
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
