"""gpulab labs: the lab runtime, lab definitions and the ``gpulab`` command line."""
