"""The simulated NVIDIA GPU stack: GPU Operator, device plugin, GFD, MIG manager, validator, DRA driver, DCGM.

Each module is one controller or one piece of pure desired-state logic. Everything acts only through the
Kubernetes API (nodes, pods, events, ResourceSlices), so it behaves the same on any backend with simulated
nodes. The NVIDIA rules themselves live in ``cluster.gpu`` (pure semantics); nothing here re-decides them.
"""
