"""gpulab's cluster layer: control-plane binaries, backends, simulated nodes, the simulated NVIDIA stack and NVML.

Everything that talks to a Kubernetes API server, to kind, to the control-plane binaries or to pynvml lives
under this package. Graders and labs reach a cluster only through its public modules.

Public: the modules named in ``__all__``. ``cluster.sim`` (the simulated nodes and GPU stack), ``cluster.supervisor``,
``cluster.gobuild``, ``cluster.safefs`` and ``cluster.seed`` are internal; labs and graders use the GPU stack
through ``cluster.gpustack`` (import-linter contracts in pyproject.toml).
"""

__all__ = ["backends", "binaries", "errors", "fleet", "gpu", "gpustack", "kube", "nvidiabuild", "nvml", "ops", "pki", "poll",
           "progress", "quantity", "strict", "testing", "versions"]
