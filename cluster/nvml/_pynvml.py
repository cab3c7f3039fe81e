"""The one place that imports ``pynvml`` (package ``nvidia-ml-py``), an optional dependency.

Everything else receives the module object from ``load()``, so tests can hand in a recorded stand-in and gpulab
imports and works on machines without it.
"""

from __future__ import annotations

from types import ModuleType

from cluster.nvml import errors


def load() -> ModuleType:
    """Import pynvml, or raise ``NvmlUnavailable`` saying how to install it."""
    try:
        import pynvml
    except ImportError as exc:
        raise errors.NvmlUnavailable(
            "pynvml is not installed, so NVML cannot be read",
            hint="pip install 'gpulab[nvml]' (the nvidia-ml-py package)",
        ) from exc
    module: ModuleType = pynvml
    return module
