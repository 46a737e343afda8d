"""``gpucomm.advisor``: one model of memory and step time that prices every way to train, and ranks them.

Data flows one way: :mod:`hardware` (the table) and :mod:`calibrate` (fits from records, :mod:`fits`,
:mod:`measured`) give a profile; :mod:`gpucomm.models` describes the model, :mod:`precision` and :mod:`job` the
run; :mod:`layout` is one way to run it (the named strategies are presets of it).  The physics: :mod:`memory`,
:mod:`timing` (with :mod:`cost`'s collective formulas and :mod:`wrappers`' host costs).  :mod:`search`
enumerates, prices and ranks layouts; :mod:`answer` decides what ``gpucomm advise`` shows, :mod:`render` shows it,
:mod:`cli` parses.  Nothing here imports torch.
"""

__all__ = ["answer", "calibrate", "cost", "fits", "hardware", "job", "layout", "measured", "memory", "precision",
           "render", "search", "timing", "wrappers"]
