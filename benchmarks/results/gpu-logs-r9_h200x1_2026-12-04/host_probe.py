"""One-off: how steady is `advise --host this`'s probe on this machine (run 6x), beside a CPU-only dispatch proxy."""
import statistics
import sys
import time

import torch

from gpucomm.advisor.compute import measure
from gpucomm.advisor.compute.source import _shipped_source


def proxy():
    x = torch.zeros(1)
    ws = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(5000):
            x.add_(1)
        ws.append((time.perf_counter() - t) / 5000 * 1e6)
    return statistics.median(ws)

src = _shipped_source("h200.json")
tag = sys.argv[1] if len(sys.argv) > 1 else ""
for i in range(6):
    t = time.perf_counter()
    r, line = measure.host_ratios(src)
    print(tag, i, {k: round(v, 3) for k, v in r.items()}, f"probe {time.perf_counter() - t:.1f} s",
          f"cpu add_ {proxy():.2f} us", flush=True)
print(line)
