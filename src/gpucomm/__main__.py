"""``python -m gpucomm`` (and ``torchrun -m gpucomm``): the same entry point as the ``gpucomm`` script."""

from gpucomm.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
