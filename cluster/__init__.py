"""gpulab's cluster layer: control-plane binaries, backends, simulated nodes, the simulated NVIDIA stack and NVML.

Everything that talks to a Kubernetes API server, to kind, to the control-plane binaries or to pynvml lives
under this package. Graders and labs reach a cluster only through its public modules.
"""
