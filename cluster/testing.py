"""A public testing kit: a real local cluster for tests, shared by users' lab tests and our own e2e tests.

``LocalCluster`` wraps a running local backend with helpers (kubectl, the gpulab CLI, a fresh namespace);
``wait_for`` polls with a bounded timeout and fails with a readable message instead of hanging.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster import binaries, errors, ops, settings
from cluster.backends.local import LocalBackend
from cluster.kube.client import Client


@dataclass
class LocalCluster:
    backend: LocalBackend
    state_root: Path
    _namespaces: list[str] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        return self.backend.kubeconfig()

    def client(self) -> Client:
        return Client.from_kubeconfig(self.kubeconfig)

    def kubectl(self, *args: str, check: bool = True, kubeconfig: Path | None = None,
                input: str | None = None) -> subprocess.CompletedProcess[str]:
        found = binaries.cached()
        assert found is not None
        cmd = [str(found.kubectl), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, input=input)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def gpulab(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = dataclasses.replace(settings.current(), state_dir=self.state_root).environ()
        exe = Path(sys.executable).parent / "gpulab"
        proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300, env=env)
        if check and proc.returncode != 0:
            raise AssertionError(f"gpulab {' '.join(args)} failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")
        return proc

    def namespace(self, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        with self.client() as c:
            c.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self._namespaces.append(name)
        return name

    def remove_tenant(self, namespace: str) -> None:
        """Undo ``LocalBackend.tenant_kubeconfig(namespace)``: the tenant's namespace and its node-reader binding."""
        with self.client() as admin:
            for path in (f"/api/v1/namespaces/{namespace}",
                         f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{ops.NODE_READER}:{namespace}"):
                try:
                    admin.delete(path)
                except errors.NotFound:
                    pass


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll until ``predicate`` returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except errors.NotFound:
            last = None
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
