"""Re-make the report screenshots in ``docs/img/``: a CPU bench run, a CPU train run, and both side by side.

Usage::

    python benchmarks/report_screenshots.py                 # runs, reports, checks, screenshots
    python benchmarks/report_screenshots.py --reuse RUNS    # reuse the runs already in RUNS/bench, RUNS/train

What it does, in order:

1. runs ``gpucomm bench -b 1K -e 64K`` and ``gpucomm train --model gpt-tiny --steps 30 --warmup-steps 5`` on
   the CPU (about 30 s together), into ``RUNS/bench`` and ``RUNS/train``;
2. writes three reports with ``gpucomm report``: the bench run, the train run, and both together;
3. lays each ``report.html`` out in headless Chromium at 1,280 px and fails when anything is wider than
   the page (a probe script, added to a copy of the page, measures every table, figure and box: the
   report itself has no script);
4. takes a 1,280 px wide screenshot of the top of each page and writes it, reduced to 256 colours, as
   ``docs/img/report-bench.png``, ``report-train.png`` and ``report-both.png`` (each under 500 KB).

Needs Chromium on PATH (``chromium``, ``chromium-browser`` or ``google-chrome``; ``apt-get install -y
chromium``).  The figures in the screenshots are CPU numbers from whatever machine runs this: they show
what a report looks like, not how fast anything is.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1280
"""The page width every check and screenshot uses (a laptop browser window)."""
HEIGHT = 1700
"""How much of the top of each page a screenshot shows: the findings and what follows them."""
MAX_BYTES = 500_000

RUNS = {"bench": ["bench", "-b", "1K", "-e", "64K"],
        "train": ["train", "--model", "gpt-tiny", "--steps", "30", "--warmup-steps", "5"]}
REPORTS = {"bench": ("bench",), "train": ("train",), "both": ("bench", "train")}

_PROBE = """<script>
(() => {
  const viewport = document.documentElement.clientWidth;
  const wide = [];
  for (const e of document.querySelectorAll("table, figure, img, pre, dl, p, li, .answer, .banner")) {
    const right = e.getBoundingClientRect().right;
    if (right > viewport + 0.5) wide.push(`${e.tagName.toLowerCase()}.${e.className || "-"} ends at ${Math.round(right)}`);
  }
  document.body.setAttribute("data-layout", JSON.stringify(
    {viewport, scroll: document.documentElement.scrollWidth, wide, tables: document.querySelectorAll("table").length}));
})();
</script>"""


def chromium() -> str:
    """The Chromium executable, or SystemExit naming how to install it."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("report_screenshots: Chromium not found on PATH; install it (apt-get install -y chromium)")


def _headless(*args: str) -> subprocess.CompletedProcess:
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--disable-dev-shm-usage", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)


def layout(page: Path, width: int = WIDTH) -> dict:
    """Lay ``page`` out at ``width`` px in headless Chromium: viewport, scroll width, and every element wider
    than the page (``wide``).  The page is copied with a measuring script added; the original is untouched."""
    text = page.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / page.name
        probe.write_text(text.replace("</body>", _PROBE + "\n</body>"), encoding="utf-8")
        dom = _headless(f"--window-size={width},2000", "--virtual-time-budget=5000", "--dump-dom",
                        probe.as_uri()).stdout
    start = dom.index('data-layout="') + len('data-layout="')
    return json.loads(html.unescape(dom[start:dom.index('"', start)]))


def screenshot(page: Path, png: Path, width: int = WIDTH, height: int = HEIGHT) -> int:
    """The top ``width`` x ``height`` px of ``page`` as a 256-colour PNG at ``png``; its size in bytes."""
    from PIL import Image

    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "shot.png"
        _headless(f"--window-size={width},{height}", f"--screenshot={raw}", page.as_uri())
        with Image.open(raw) as image:
            image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)
    return png.stat().st_size


def _gpucomm(*args: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    print("$ gpucomm " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "gpucomm", *args], check=True, env=env, cwd=ROOT,
                   stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reuse", metavar="RUNS", type=Path, help="reuse RUNS/bench and RUNS/train")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where the PNGs go (docs/img)")
    args = parser.parse_args(argv)
    chromium()  # fail before any work
    with tempfile.TemporaryDirectory(prefix="gpucomm-screenshots-") as tmp:
        runs = args.reuse or Path(tmp) / "runs"
        for name, command in RUNS.items():
            if not (runs / name / "records.jsonl").is_file():
                _gpucomm(*command, "--out", str(runs / name))
        problems = []
        for name, parts in REPORTS.items():
            out = runs / f"report-{name}"
            _gpucomm("report", *(str(runs / p) for p in parts), "--out", str(out))
            page = out / "report.html"
            measured = layout(page)
            if measured["scroll"] > measured["viewport"] or measured["wide"]:
                problems.append(f"{name}: wider than {WIDTH} px: {measured}")
            size = screenshot(page, args.out / f"report-{name}.png")
            print(f"{args.out / f'report-{name}.png'}: {size:,} bytes; page {measured['scroll']} px wide at "
                  f"{measured['viewport']} px, {measured['tables']} tables", flush=True)
            if size > MAX_BYTES:
                problems.append(f"{name}: screenshot is {size:,} bytes, more than {MAX_BYTES:,}")
    for p in problems:
        print(f"report_screenshots: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
