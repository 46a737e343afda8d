"""``gpucomm.parallel`` — data parallel in one process (and across processes) for your own training loop.

The single-process data parallel that ``gpucomm train`` measures as ``replicated``, as a library: an
upgrade from ``torch.nn.DataParallel`` that keeps its replicas, averages gradients during backward and
can replay whole steps from CUDA graphs.  ``docs/parallel.md`` shows the migration.

* :class:`ReplicatedDataParallel` — the wrapper (``replicated.py``);
* :class:`PerReplica` — one forward output per replica, left on its device (``outputs.py``);
* :class:`ReplicatedOptimizer` — the replicas' optimizers behind one ``torch.optim.Optimizer`` (``optimizer.py``);
* :class:`GraphCaptureError` — a step that cannot be captured in a CUDA graph (``graphs.py``).

Inside: ``batch.py`` splits a batch by dim 0, ``loss.py`` weights the replicas' losses, ``reducer.py``
averages gradients in buckets during backward, ``buffers.py`` keeps buffers equal, ``threads.py`` runs
the forwards, ``checks.py`` checks the arguments.
"""

from gpucomm.parallel.graphs import GraphCaptureError
from gpucomm.parallel.optimizer import ReplicatedOptimizer
from gpucomm.parallel.outputs import PerReplica
from gpucomm.parallel.replicated import ReplicatedDataParallel

__all__ = ["GraphCaptureError", "PerReplica", "ReplicatedDataParallel", "ReplicatedOptimizer"]
