"""Why NVML could not be read on this machine (no library, no driver, no GPU), with the CLI's exit code."""

from __future__ import annotations

from cluster import errors

# `gpulab probe` exits with this code when the machine has no usable NVIDIA GPU (documented in the CLI help).
EXIT_NO_GPU = 3


class NvmlUnavailable(errors.CourseError):
    """NVML cannot describe this machine's GPUs: pynvml missing, driver library missing or not loaded, no GPU."""

    exit_code = EXIT_NO_GPU
