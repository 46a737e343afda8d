"""Where the host time of a replayed ``ReplicatedDataParallel(graphs=True)`` step goes, on one GPU.

``benchmarks/parallel_vs_dataparallel.py`` measures a replayed step's launch time against its GPU time (target
<= 1/32 per replica-step) and splits it by phase.  This script explains those phases:

1. **The launch cost of a graph by its size.**  Graphs of ``k`` tiny kernels (``k`` = 1 ... 4096) are captured
   and each is replayed from an idle device (synchronised before every replay, the launch clock of the
   benchmark): the host time of ``replay()`` against ``k``, and a least-squares line ``a + b * k`` through it.
   If ``b`` is not negligible, a step's launch time is bought per captured kernel.
2. **The step's own graphs.**  GPT-124M (bf16 autocast, fused capturable AdamW, 16 x 1024 per replica) under
   ``ReplicatedDataParallel(graphs=True)`` on the device repeated ``--replicas`` times: the kernels of one
   eager forward+backward of one replica (``torch.profiler``: the nodes its captured graph holds), each
   captured graph's replay from idle, and the whole step's host time from idle.
3. **A user's own graph of the same step.**  The plain loop's forward+backward captured with
   ``torch.cuda.graph`` (no gpucomm), its node types counted through the CUDA runtime
   (``cudaGraphGetNodes``/``cudaGraphNodeGetType`` on ``raw_cuda_graph()``), and its replay from idle: whether
   the forward-backward graph's launch cost is the model's or the wrapper's.
4. **The Python around the replays.**  ``cProfile`` over ``--profile-steps`` replayed steps, the functions
   with the most own time.

Usage (one GPU; about 40 s on an H200):
    python benchmarks/graph_launch_cost.py --out $OUT
    python benchmarks/graph_launch_cost.py --device cpu   # refused: graphs need CUDA (exit 2)

Writes ``graph-launch-cost_<hardware>_<date>.txt`` with the command, the environment and the tables.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import datetime as dt
import io
import os
import platform
import pstats
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from gpucomm.parallel import ReplicatedDataParallel
from gpucomm.train.models import load_workload

SIZES = (1, 16, 128, 512, 1024, 2048, 4096)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="cuda (graphs need it)")
    p.add_argument("--replicas", type=int, default=2, help="replicas on the repeated device (default 2)")
    p.add_argument("--batch", type=int, default=16, help="samples per replica (default 16)")
    p.add_argument("--replays", type=int, default=30, help="timed replays per graph (default 30)")
    p.add_argument("--profile-steps", type=int, default=20, help="steps under cProfile (default 20)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: $OUT, else benchmarks/results)")
    args = p.parse_args(argv)
    if args.device != "cuda" or not torch.cuda.is_available():
        p.error(f"--device: expected cuda with a GPU present (CUDA graphs), but got {args.device!r}"
                f"{'' if torch.cuda.is_available() else ' and no GPU'}; run it on the GPU machine")
    for name in ("replicas", "batch", "replays", "profile_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: expected an integer >= 1, but got {getattr(args, name)}")
    return args


def _from_idle(fn, n: int) -> float:
    """Median host ms of ``fn()`` started from an idle device."""
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(times)


def _launch_by_size(emit, replays: int) -> None:
    x = torch.zeros(256, device="cuda")
    rows = []
    for k in SIZES:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                for _ in range(k):
                    x.add_(1.0)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(k):
                x.add_(1.0)
        for _ in range(3):
            g.replay()
        rows.append((k, _from_idle(g.replay, replays)))
        del g
    emit("## 1. replay() host time from an idle device, by kernels in the graph")
    emit(f"{'kernels':>8} {'replay_ms':>10} {'us/kernel':>10}")
    for k, ms in rows:
        emit(f"{k:>8} {ms:>10.4f} {ms * 1e3 / k:>10.3f}")
    ks, ms = [r[0] for r in rows], [r[1] for r in rows]
    mk, mm = statistics.fmean(ks), statistics.fmean(ms)
    b = sum((k - mk) * (m - mm) for k, m in zip(ks, ms, strict=True)) / sum((k - mk) ** 2 for k in ks)
    a = mm - b * mk
    emit(f"least squares: replay_ms = {a:.4f} + {b * 1e3:.4f} us x kernels")


def _kernels_of_eager_step(net, loss_fn, x, y) -> int:
    from torch.profiler import ProfilerActivity, profile

    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, fused=True)
    for _ in range(2):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.zero_grad()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(net(x), y)
        loss.backward()
        torch.cuda.synchronize()
    opt.zero_grad(set_to_none=True)
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


_NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "child graph", 5: "empty", 6: "event wait",
               7: "event record", 8: "semaphore signal", 9: "semaphore wait", 10: "mem alloc", 11: "mem free",
               12: "batch mem op", 13: "conditional"}


def _cudart() -> ctypes.CDLL | None:
    """The CUDA runtime this process loaded (torch's), found in /proc/self/maps."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libcudart.so" in line}
    return ctypes.CDLL(sorted(paths)[0]) if paths else None


def _node_types(graph: int) -> dict[str, int] | str:
    """{node type: count} of a cudaGraph_t, or why it could not be read."""
    rt = _cudart()
    if rt is None:
        return "libcudart not found in this process"
    n = ctypes.c_size_t(0)
    if rt.cudaGraphGetNodes(ctypes.c_void_p(graph), None, ctypes.byref(n)) != 0:
        return "cudaGraphGetNodes failed"
    nodes = (ctypes.c_void_p * n.value)()
    rt.cudaGraphGetNodes(ctypes.c_void_p(graph), nodes, ctypes.byref(n))
    counts: dict[str, int] = {}
    kind = ctypes.c_int(0)
    for node in nodes:
        rt.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind))
        name = _NODE_TYPES.get(kind.value, f"type {kind.value}")
        counts[name] = counts.get(name, 0) + 1
    roots = ctypes.c_size_t(0)
    if rt.cudaGraphGetRootNodes(ctypes.c_void_p(graph), None, ctypes.byref(roots)) == 0:
        counts["(root nodes)"] = roots.value
    return counts


def _plain_graph(workload, dev: torch.device, batch: int, replays: int, emit) -> None:
    """The user's own capture of one forward+backward (no gpucomm), its node types and replay from idle."""
    net = workload.build_model().to(dev)
    x, y = (t.to(dev) for t in workload.batch_fn(0, 0, batch))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                loss = workload.loss_fn(net(x), y)
            loss.backward()
    torch.cuda.current_stream().wait_stream(s)
    try:
        g = torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:  # torch before keep_graph: no node count
        g = None
    graph = g or torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = workload.loss_fn(net(x), y)
        loss.backward()
    types = _node_types(graph.raw_cuda_graph()) if g is not None else "keep_graph unavailable in this torch"
    if g is not None:
        graph.instantiate()
    for _ in range(3):
        graph.replay()
    emit("## 3. the same forward+backward captured by a user's own torch.cuda.graph (no gpucomm)")
    emit(f"node types: {types}")
    emit(f"replay from idle: {_from_idle(graph.replay, replays):.4f} ms")
    del graph, g, net


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    out = args.out or Path(os.environ.get("OUT") or Path(__file__).resolve().parent / "results")
    lines: list[str] = []

    def emit(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    command = "python benchmarks/graph_launch_cost.py" + "".join(f" {shlex.quote(a)}" for a in (argv or sys.argv[1:]))
    emit("# graph-launch-cost: where a replayed ReplicatedDataParallel(graphs=True) step's host time goes")
    emit(f"# command: {command}")
    emit(f"# date {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}; {torch.cuda.get_device_name(0)}; "
         f"python {platform.python_version()}; torch {torch.__version__}; cpus {os.cpu_count()}; "
         f"load_avg_1m {os.getloadavg()[0]:.2f}")
    _launch_by_size(emit, args.replays)

    workload = load_workload("gpt-124m", seed=0)
    dev = torch.device("cuda:0")
    net = workload.build_model().to(dev)
    x1, y1 = (t.to(dev) for t in workload.batch_fn(0, 0, args.batch))
    kernels = _kernels_of_eager_step(net, workload.loss_fn, x1, y1)
    emit(f"## 2. the step's graphs: gpt-124m, {args.batch} x {workload.seq_len} per replica, bf16 autocast, "
         f"fused capturable AdamW, {args.replicas} replicas on cuda:0")
    emit(f"kernels of one eager forward+backward of one replica (torch.profiler): {kernels}")
    model = ReplicatedDataParallel(net, [dev] * args.replicas, torch.optim.AdamW, lr=3e-4, fused=True,
                                   capturable=True, graphs=True)
    batches = [tuple(t.pin_memory() for t in workload.batch_fn(0, s, args.batch * args.replicas)) for s in range(8)]

    def step(i: int = 0) -> None:
        x, y = batches[i % len(batches)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            model.train_step(x, y, loss_fn=workload.loss_fn)

    for i in range(5):
        step(i)
    torch.cuda.synchronize()
    graphs = model._step_graphs.graphs  # the captured phases, replica by replica (a diagnostic's reach inside)
    names = ["forward_backward", "all_reduce", "optimizer"] if len(graphs) == 3 else ["whole step"]
    emit(f"{'graph':<18} {'replica':>7} {'replay_ms':>10}")
    for name, phase in zip(names, graphs, strict=True):
        for r, g in enumerate(phase):
            emit(f"{name:<18} {r:>7} {_from_idle(g.replay, args.replays):>10.4f}")
    counter = iter(range(10**9))
    whole = _from_idle(lambda: step(next(counter)), args.replays)
    emit(f"whole train_step from idle: {whole:.4f} ms per step, {whole / args.replicas:.4f} ms per replica-step")

    _plain_graph(workload, dev, args.batch, args.replays, emit)

    prof = cProfile.Profile()
    torch.cuda.synchronize()
    prof.enable()
    for i in range(args.profile_steps):
        step(i)
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
    emit(f"## 4. cProfile of {args.profile_steps} replayed steps (host, no syncs between them), by own time")
    lines.extend(line.rstrip() for line in buf.getvalue().splitlines() if line.strip())
    print(buf.getvalue())

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"graph-launch-cost_h200x1_{dt.datetime.now(dt.timezone.utc):%Y-%m-%d}.txt"
    if "H200" not in torch.cuda.get_device_name(0):
        path = path.with_name(path.name.replace("h200x1", "gpu"))
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
