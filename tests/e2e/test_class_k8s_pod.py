"""A class on Kubernetes: the learner pod that Zero to JupyterHub's KubeSpawner would create from
course/class/z2jh-values.yaml is admitted, by server-side dry-run (``?dryRun=All``), by our own real API server
into a namespace that enforces Pod Security "restricted": unprivileged, non-root, no hostPath, no added
capabilities, every capability dropped, RuntimeDefault seccomp, with the requests, limits, home volume and
nbgrader exchange the values file asks for.

The pod is KubeSpawner's own ``get_pod_manifest()`` (jupyterhub-kubespawner from PyPI), configured as the chart's
hub config would configure it (tests/z2jh_chart.py) from our values merged over the chart's defaults. The
same namespace refuses a privileged variant, a hostPath variant, and the pod the chart's defaults would make
without our override of ``singleuser.cloudMetadata`` (its privileged iptables init container), so the test fails
whenever Pod Security would stop the real deployment.

Not tested here: building the image, Helm itself, a scheduled pod, a real StorageClass (see docs/class-mode.md).
"""

from __future__ import annotations

import asyncio
import copy
import types
import uuid
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from cluster import errors, quantity
from cluster.testing import LocalCluster, wait_for
from prerequisites import require
from z2jh_chart import CHART_DEFAULTS, get_config, helm_merge, load_yaml, spawner_config, unknown_keys

VALUES = Path(__file__).resolve().parents[2] / "course" / "class" / "z2jh-values.yaml"
LEARNER = "learner-1"

try:
    import kubespawner
    from kubernetes_asyncio.client import ApiClient
    from kubernetes_asyncio.config import kube_config
except ImportError:  # pragma: no cover - the test extra installs it
    kubespawner = None


@pytest.fixture
def restricted_namespace(local_cluster: LocalCluster) -> Iterator[str]:
    """A namespace created with Pod Security ``restricted`` enforced from its first version (so admission never
    sees it unlabelled), with its default ServiceAccount in place (service account admission needs it)."""
    name = f"class-{uuid.uuid4().hex[:6]}"
    labels = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/enforce-version": "latest"}
    with local_cluster.client() as c:
        c.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": name, "labels": labels}})
        try:
            wait_for(lambda: c.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"), timeout=60,
                     what=f"the default ServiceAccount in {name}")
            yield name
        finally:
            try:
                c.delete(f"/api/v1/namespaces/{name}")
            except errors.NotFound:
                pass


def render(values: dict[str, Any], namespace: str, kubeconfig: Path,
           monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any]]:
    """The learner's pod and home-volume claim, as KubeSpawner makes them, as JSON the API server accepts."""
    # KubeSpawner loads a kubeconfig when it is constructed (it only talks to the API in start()); point it at
    # our cluster so nothing reaches for ~/.kube/config (the client library reads $KUBECONFIG at import time).
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    config = spawner_config(values, namespace)
    user = types.SimpleNamespace(name=LEARNER, id=1, url=f"/user/{LEARNER}/")

    async def make() -> tuple[dict[str, Any], dict[str, Any]]:
        spawner = kubespawner.KubeSpawner(config=config, user=user, _mock=True)
        pod = await spawner.get_pod_manifest()
        pvc = spawner.get_pvc_manifest()
        async with ApiClient() as api:
            return api.sanitize_for_serialization(pod), api.sanitize_for_serialization(pvc)

    pod, pvc = asyncio.run(make())
    pod.update(apiVersion="v1", kind="Pod")
    pvc.update(apiVersion="v1", kind="PersistentVolumeClaim")
    return pod, pvc


def dry_run(cluster: LocalCluster, namespace: str, resource: str, body: dict[str, Any]) -> dict[str, Any]:
    with cluster.client() as c:
        admitted = c.create(f"/api/v1/namespaces/{namespace}/{resource}", body, dryRun="All")
        with pytest.raises(errors.NotFound):  # a dry run persists nothing
            c.get(f"/api/v1/namespaces/{namespace}/{resource}/{body['metadata']['name']}")
    return admitted


def refused(cluster: LocalCluster, namespace: str, pod: dict[str, Any], *fragments: str) -> str:
    """The pod must be refused by Pod Security admission (HTTP 403 naming the restricted level)."""
    with pytest.raises(errors.ApiError) as caught:
        dry_run(cluster, namespace, "pods", pod)
    exc = caught.value
    assert exc.status == 403, f"expected 403 Forbidden, got {exc.status}: {exc.api_message}"
    assert 'violates PodSecurity "restricted' in exc.api_message, exc.api_message
    for fragment in fragments:
        assert fragment in exc.api_message, f"{fragment!r} not in: {exc.api_message}"
    return exc.api_message


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


def test_values_use_only_keys_the_chart_defines() -> None:
    """A misspelt key would be ignored by our rendering and refused by the chart's schema: name it here."""
    assert unknown_keys(load_yaml(VALUES), load_yaml(CHART_DEFAULTS)) == []


def test_learner_pod_passes_restricted_and_privileged_variants_do_not(
        local_cluster: LocalCluster, restricted_namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    require(kubespawner is not None, "jupyterhub-kubespawner is missing; install the test extra: make python-deps")
    ours = load_yaml(VALUES)
    values = helm_merge(load_yaml(CHART_DEFAULTS), ours)
    pod, pvc = render(values, restricted_namespace, local_cluster.kubeconfig, monkeypatch)

    admitted = dry_run(local_cluster, restricted_namespace, "pods", pod)
    spec = admitted["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not any("hostPath" in v for v in spec.get("volumes", [])), spec["volumes"]
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
    for container in containers(admitted):
        sc = container.get("securityContext", {})
        assert sc.get("privileged") is not True, container["name"]
        assert sc.get("allowPrivilegeEscalation") is False, container["name"]
        assert sc.get("capabilities", {}).get("drop") == ["ALL"], container["name"]
        assert not sc.get("capabilities", {}).get("add"), container["name"]
        assert sc.get("runAsUser", spec["securityContext"].get("runAsUser")) == ours["singleuser"]["uid"] != 0

    learner = spec["containers"][0]
    assert learner["image"] == f"{ours['singleuser']['image']['name']}:{ours['singleuser']['image']['tag']}"
    resources = learner["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"} and set(resources["limits"]) == {"cpu", "memory"}
    # KubeSpawner reads the chart's "640M" as 640 MiB (its ByteSpecification uses powers of 1024).
    assert {k: quantity.parse(v).value for k, v in resources["requests"].items()} == {"cpu": Fraction(1, 10),
                                                                                   "memory": 640 * 1024**2}, resources
    assert {k: quantity.parse(v).value for k, v in resources["limits"].items()} == {"cpu": 2,
                                                                                 "memory": 1280 * 1024**2}, resources
    mounts = {m["mountPath"]: m["name"] for m in learner["volumeMounts"]}
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"]
              if "persistentVolumeClaim" in v}
    assert claims[mounts["/home/jovyan"]] == pvc["metadata"]["name"], (mounts, claims)
    assert claims[mounts["/srv/nbgrader/exchange"]] == "nbgrader-exchange", (mounts, claims)
    env = {e["name"]: e.get("value") for e in learner["env"]}
    assert env["GPULAB_STATE_DIR"].startswith("/home/jovyan/"), env

    claim = dry_run(local_cluster, restricted_namespace, "persistentvolumeclaims", pvc)
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"] == ours["singleuser"]["storage"]["capacity"]

    # Negative controls: the same namespace refuses what "restricted" forbids, so the pass above means something.
    privileged = copy.deepcopy(pod)
    # (the API server's validation refuses privileged together with allowPrivilegeEscalation: false)
    privileged["spec"]["containers"][0]["securityContext"].pop("allowPrivilegeEscalation")
    privileged["spec"]["containers"][0]["securityContext"]["privileged"] = True
    refused(local_cluster, restricted_namespace, privileged, "privileged")

    host_path = copy.deepcopy(pod)
    host_path["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/var/run"}})
    refused(local_cluster, restricted_namespace, host_path, "hostPath")

    chart_default = helm_merge(values, {"singleuser": {"cloudMetadata": {"blockWithIptables": True}}})
    assert get_config(load_yaml(CHART_DEFAULTS), "singleuser.cloudMetadata.blockWithIptables") is True
    default_pod, _ = render(chart_default, restricted_namespace, local_cluster.kubeconfig, monkeypatch)
    refused(local_cluster, restricted_namespace, default_pod, "block-cloud-metadata", "NET_ADMIN")
