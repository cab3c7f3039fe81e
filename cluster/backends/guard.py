"""One check that every destructive lab step makes before it changes a cluster.

On the ``attach`` backend the cluster belongs to someone else (a department cluster, a cloud cluster a class
shares), so steps that delete nodes, relabel or taint them, drain them, patch node status or change cluster-wide
policy must refuse there. Call ``refuse_if_attach(backend, "taint every GPU node")`` at the top of such a step.
"""

from __future__ import annotations

from cluster import errors
from cluster.backends.base import Backend


def refuse_if_attach(backend: Backend, action: str) -> None:
    """Raise ``CourseError`` naming ``action`` when ``backend`` is an attached (foreign) cluster."""
    if backend.name == "attach":
        raise errors.CourseError(
            f"refusing to {action}: the lab cluster is attached (someone else's cluster), and gpulab only changes "
            "nodes and cluster-wide settings on clusters it created",
            hint="run this step on a lab cluster of your own: `gpulab down --purge` (forgets the attached one, "
            "leaving it untouched), then `gpulab up` (local) or `gpulab up --backend kind`",
        )
