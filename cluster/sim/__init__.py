"""Simulated nodes and the controllers that play their kubelets (node heartbeat, pod lifecycle) and the NVIDIA stack.

Everything here acts only through the Kubernetes API, so it works the same against any backend that has
simulated nodes. The real kube-scheduler places pods; nothing here decides placement.
"""
