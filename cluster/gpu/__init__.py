"""NVIDIA GPU semantics as plain functions: the catalog, device-plugin and mig-parted configs, GFD labels.

Both the simulated GPU stack and the NVML probe derive what a node advertises from these functions, so one
source of truth serves simulated and real hardware. Nothing here talks to a cluster or to NVML.
"""
