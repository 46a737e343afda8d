"""``gpucomm.advisor``: a calibrated cost model that recommends a training strategy.

Data flows one way: :mod:`hardware` (the table) and :mod:`calibrate` (fits from records) give a
profile; :mod:`workload` describes the job; :mod:`cost` holds the formulas; :mod:`plan` predicts, ranks
and explains; :mod:`cli` renders (``gpucomm advise``).  Nothing here imports torch.
"""

__all__ = ["calibrate", "cost", "hardware", "plan", "workload"]
