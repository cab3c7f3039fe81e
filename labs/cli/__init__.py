"""The ``gpulab`` command line. Each ``cmd_*`` module registers its own commands."""
