"""``python -m gpucomm.report.docs``: see :mod:`gpucomm.report.docs.cli`."""

from gpucomm.report.docs.cli import main

raise SystemExit(main())
