"""``build``: write ``report.md``, ``report.html`` and plot files from result directories.

The whole report is rendered in memory first — records loaded and validated, Markdown and HTML text
and every plot's bytes — and only then written, each file through a temporary name and a rename, so
a bad record or a rendering error leaves no half-written report behind.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gpucomm.report import content, html, markdown
from gpucomm.report.runs import load_runs

__all__ = ["build"]


def _out_dir(result_dirs: Sequence[Path], out_dir: str | os.PathLike[str] | None) -> Path:
    if out_dir is not None:
        return Path(out_dir)
    if len(result_dirs) == 1 and result_dirs[0].is_dir():
        return result_dirs[0]
    if len(result_dirs) == 1:
        return result_dirs[0].parent
    raise ValueError(f"out_dir: required when reporting on several result directories "
                     f"({len(result_dirs)} given); pass out_dir= (or --out DIR)")


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def build(result_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
          out_dir: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Write the Markdown and HTML report of one or more result directories.

    Args:
        result_dirs: result directories (or ``records.jsonl`` files).  Several compare machines or
            versions; each is labelled by its env block (hostname, device, torch version, date).
        out_dir: where to write; default the single result directory.  Required with several.

    Returns:
        ``{"markdown": report.md, "html": report.html, "plots/<name>.png": …, "plots/<name>.svg": …}``.

    Raises:
        ValueError: no result directory, or several without ``out_dir``.
        gpucomm.records.RecordError: a directory that does not exist, holds no records or a bad line.
        OSError: ``out_dir`` cannot be written.
    """
    if isinstance(result_dirs, str | os.PathLike):
        result_dirs = [result_dirs]
    dirs = [Path(d) for d in result_dirs]
    runs = load_runs(dirs)
    out = _out_dir(dirs, out_dir)
    doc = content.document(runs)
    files: dict[str, bytes] = {"report.md": markdown.render(doc).encode("utf-8"),
                               "report.html": html.render(doc).encode("utf-8")}
    for fig in doc.figures():
        files[f"plots/{fig.name}.png"] = fig.png
        files[f"plots/{fig.name}.svg"] = fig.svg
    try:
        out.mkdir(parents=True, exist_ok=True)
        if len(files) > 2:
            (out / "plots").mkdir(exist_ok=True)
        written = {}
        for name, data in files.items():
            _write(out / name, data)
            written[name] = out / name
    except OSError as exc:
        raise OSError(f"out_dir {str(out)!r}: cannot write the report there ({exc.strerror or exc}); "
                      f"choose a writable directory") from exc
    paths = {"markdown": written.pop("report.md"), "html": written.pop("report.html")}
    paths.update(written)
    return paths
