"""Read real GPUs through NVML, strictly read-only, and compare them with what a Kubernetes node advertises.

``probe()`` returns a ``ProbeResult`` whose ``inventory`` is the same ``NodeInventory`` type the simulated GPU stack
uses, so ``cluster.gpu.advertise`` derives labels and resources for real and simulated hosts alike. ``drift()``
compares a Node object with that derivation. This package never calls an NVML setter: no MIG mode change, no
compute-mode change, no reset, no clocks (tests/unit/test_nvml_readonly.py scans for setters). ``pynvml`` is
imported only in ``_pynvml.py``; without it ``probe()`` raises ``NvmlUnavailable``.
"""
