"""What `gpulab kubeconfig --tenant NS` asks the API server for, before any cluster: an existing namespace that
gpulab did not make as a tenant's is refused untouched; a tenant namespace gets Pod Security ``restricted``, an
admin-owned quota and limit range (read-only to the tenant) and a quota that rations the critical priority
classes to nothing. The real API server's answers are in tests/e2e/test_isolation.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster import errors, ops


class RecordingClient:
    """Answers GETs from ``objects`` and records every write."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.writes: list[tuple[str, str, Any]] = []

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path not in self.objects:
            raise errors.NotFound(404, "NotFound", f"{path} not found")
        return self.objects[path]

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("create", path, body))
        if path.endswith("/token"):
            return {"status": {"token": "t0ken"}}
        return body

    def patch(self, path: str, body: Any, *_: Any) -> dict[str, Any]:
        self.writes.append(("patch", path, body))
        return {}

    def replace(self, path: str, body: Any) -> dict[str, Any]:
        self.writes.append(("replace", path, body))
        return {}


def test_an_existing_namespace_without_the_tenant_label_is_refused_and_untouched(tmp_path: Path) -> None:
    client = RecordingClient({"/api/v1/namespaces/team-x": {"metadata": {"name": "team-x", "labels": {"app": "db"}}}})
    with pytest.raises(errors.ConfigError, match="already exists and is not a gpulab tenant namespace") as info:
        ops.tenant_kubeconfig(client, "team-x", tmp_path / "k", server="https://127.0.0.1:1",  # type: ignore[arg-type]
                              ca_file=tmp_path / "ca")
    assert "gpulab kubeconfig --tenant <new-namespace>" in str(info.value)
    assert client.writes == [] and not (tmp_path / "k").exists()


def test_a_new_tenant_namespace_gets_pod_security_quotas_and_limits(tmp_path: Path) -> None:
    client = RecordingClient({})
    (tmp_path / "ca").write_text("")
    ops.tenant_kubeconfig(client, "team-y", tmp_path / "k", server="https://127.0.0.1:1",  # type: ignore[arg-type]
                          ca_file=tmp_path / "ca")
    created = {(body.get("kind"), body["metadata"]["name"] if "metadata" in body else path): body
               for verb, path, body in client.writes if verb == "create"}
    labels = created["Namespace", "team-y"]["metadata"]["labels"]
    assert labels[ops.TENANT_LABEL] == "true" and labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert created["ResourceQuota", ops.TENANT_QUOTA]["spec"]["hard"]["pods"] == "50"
    critical = created["ResourceQuota", ops.CRITICAL_QUOTA]["spec"]
    assert critical["hard"] == {"pods": "0"}
    assert critical["scopeSelector"]["matchExpressions"] == [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical", "system-cluster-critical"]}]
    assert created["LimitRange", ops.TENANT_LIMITS]["spec"]["limits"][0]["type"] == "Container"
    role = created["ClusterRole", ops.TENANT_ROLE]["rules"]
    writable = {r for rule in role if "delete" in rule["verbs"] for r in rule["resources"]}
    assert not writable & {"limitranges", "resourcequotas", "secrets", "namespaces"}, writable


def test_our_own_tenant_namespace_is_brought_up_to_date(tmp_path: Path) -> None:
    """Re-running --tenant on a namespace gpulab made (an older one, without Pod Security labels) adds them."""
    client = RecordingClient({"/api/v1/namespaces/team-z": {"metadata": {"name": "team-z",
                                                                         "labels": {ops.TENANT_LABEL: "true"}}}})
    (tmp_path / "ca").write_text("")
    ops.tenant_kubeconfig(client, "team-z", tmp_path / "k", server="https://127.0.0.1:1",  # type: ignore[arg-type]
                          ca_file=tmp_path / "ca")
    patched = [body for verb, path, body in client.writes if verb == "patch" and path == "/api/v1/namespaces/team-z"]
    assert patched and patched[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
