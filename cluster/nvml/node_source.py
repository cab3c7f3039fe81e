"""Where ``gpulab probe --node`` gets the Node object from: a thin seam, today ``kubectl get node -o json``.

The drift rules take the Node as plain data, so another source can replace this one without touching them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from cluster import errors


class KubectlNodeSource:
    """Runs ``kubectl --kubeconfig PATH get node NAME -o json`` with the kubectl found on PATH."""

    def __init__(self, kubeconfig: str, kubectl: str = "kubectl", timeout_s: float = 30.0) -> None:
        self.kubeconfig = kubeconfig
        self.kubectl = kubectl
        self.timeout_s = timeout_s

    def get_node(self, name: str) -> dict[str, Any]:
        exe = shutil.which(self.kubectl)
        if exe is None:
            raise errors.CourseError(f"{self.kubectl} is not on PATH, so node {name} cannot be read",
                                     hint="install kubectl or put it on PATH")
        cmd = [exe, "--kubeconfig", self.kubeconfig, "get", "node", name, "-o", "json"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise errors.CommandFailed(cmd, -1, f"timed out after {self.timeout_s:.0f}s",
                                       hint="is the API server reachable with this kubeconfig?") from exc
        if done.returncode != 0:
            raise errors.CommandFailed(cmd, done.returncode, done.stderr or done.stdout,
                                       hint=f"kubectl --kubeconfig {self.kubeconfig} get nodes")
        try:
            node: dict[str, Any] = json.loads(done.stdout)
        except json.JSONDecodeError as exc:
            raise errors.CommandFailed(cmd, 0, f"kubectl printed something that is not JSON: {exc}") from exc
        return node
