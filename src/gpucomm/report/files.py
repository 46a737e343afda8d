"""The report's files: :func:`build` writes ``report.md``, ``report.html`` and plot files from result directories.

(The module is not called ``build``: ``gpucomm.report.build`` is the function, and a submodule of that name
would replace it on the package once imported.)

The whole report is rendered in memory first — records loaded and validated, Markdown and HTML text
and every plot's bytes — and only then written, each file through a temporary name and a rename, so
a bad record or a rendering error leaves no half-written report behind.  The temporary file is
created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``, a random name, mode 0644) in the target
directory: a file or symlink planted at a predictable name cannot redirect the write elsewhere, and the
rename replaces the target itself, never what a symlink there points to.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from gpucomm.records import new_run_dir
from gpucomm.report import content, html, markdown
from gpucomm.report.runs import Run, load_runs

__all__ = ["build", "default_out_dir", "report_dir", "write_report"]


def report_dir(result_dirs: Sequence[Path], runs: Sequence[Run], out_dir: str | os.PathLike[str] | None) -> Path:
    """``out_dir``; else the one run's own directory when one run was named; else :func:`default_out_dir`."""
    if out_dir is not None:
        return Path(out_dir)
    if len(runs) == 1 and len(result_dirs) == 1 and runs[0].directory == result_dirs[0]:
        return result_dirs[0] if result_dirs[0].is_dir() else result_dirs[0].parent
    return default_out_dir()


def default_out_dir() -> Path:
    """Where a report of several runs goes: a new result directory ``gpucomm-results/report-<UTC time>-<pid>``
    (:func:`gpucomm.records.new_run_dir`, the one naming scheme of every command), made when it is written.

    Never the directory holding the runs itself: a report is not a run, and writing there would mix
    report files in with the runs.
    """
    return new_run_dir("report", create=False)


_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through an exclusively created temporary file and a rename."""
    for _attempt in range(16):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, _FLAGS, 0o644)
        except FileExistsError:  # astronomically unlikely; pick another name
            continue
        break
    else:
        raise FileExistsError(f"could not create a temporary file next to {path}")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def build(result_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
          out_dir: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Write the Markdown and HTML report of one or more result directories.

    Args:
        result_dirs: result directories (or ``records.jsonl`` files, or directories holding result
            directories: each run below is its own run, :func:`gpucomm.report.runs.find_runs`).  Several
            compare machines, versions or kinds of run; each is labelled by its env block (hostname, device,
            torch version, date).
        out_dir: where to write; default the single result directory named, or :func:`default_out_dir`
            for several runs.

    Returns:
        ``{"markdown": report.md, "html": report.html, "plots/<name>.png": …, "plots/<name>.svg": …}``.

    Raises:
        ValueError: no result directory.
        gpucomm.records.RecordError: a directory that does not exist, holds no result rows or a bad line.
        OSError: ``out_dir`` cannot be written.
    """
    if isinstance(result_dirs, str | os.PathLike):
        result_dirs = [result_dirs]
    dirs = [Path(d) for d in result_dirs]
    runs = load_runs(dirs)
    return write_report(runs, report_dir(dirs, runs, out_dir))


def write_report(runs: Sequence[Run], out: Path) -> dict[str, Path]:
    """Render the report of ``runs`` in memory, then write it into ``out`` (see :func:`build`)."""
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
