"""``python -m gpurace``: the same CLI as the ``gpurace`` console script."""

from gpurace.cli import main

if __name__ == "__main__":
    main(prog_name="gpurace")
