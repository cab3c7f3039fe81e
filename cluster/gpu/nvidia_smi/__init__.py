"""The simulated ``nvidia-smi``: what the real tool prints inside a container that holds GPUs, as pure functions.

``view`` says what a container sees (the node's GPUs, the ``board`` facts beside them, ``NVIDIA_VISIBLE_DEVICES``);
``cli.run(view, argv, now)`` answers an argv with stdout text and an exit code. The renderers behind it, one
module per output format, are private. Formats follow outputs recorded on
real H100 and H200 GPUs with driver 580 (``tests/fixtures/nvidia-smi/``). Nothing here runs a process, talks to a
cluster or to NVML; the exec plumbing that calls ``cli.run`` lives elsewhere.
"""

__all__ = ["board", "cli", "view"]
