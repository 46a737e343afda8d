"""``gpucomm.advisor``: a calibrated cost model that recommends a training strategy.

Data flows one way: :mod:`hardware` (the table) and :mod:`calibrate` (fits from records, :mod:`fits`)
give a profile; :mod:`gpucomm.models` and :mod:`workload` describe the job; :mod:`cost` holds the
collective and state formulas.  The planner: :mod:`layout` (a parallel layout and its rules),
:mod:`memory` and :mod:`timing` (the physics), :mod:`search` (enumerate, rank, explain).  :mod:`plan`
predicts the named strategies of the 1-64 GPU comparison; :mod:`cli` renders (``gpucomm advise``).
Nothing here imports torch.
"""

__all__ = ["calibrate", "cost", "fits", "hardware", "layout", "memory", "plan", "search", "timing", "workload"]
