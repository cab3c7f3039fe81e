"""The class tier's deployment on kind, as objects: the hub (KubeSpawner configured from course/class/z2jh-values.yaml
the way the Zero to JupyterHub chart configures it, tests/z2jh_chart.py), its RBAC, the proxy's Service, the
nbgrader exchange claim (course/class/nbgrader-exchange-pvc.yaml) and a grader pod, in a namespace that enforces
Pod Security ``restricted``. tests/kind/test_class_on_kind.py deploys them; tests/unit/test_class_values_agree.py
checks that they and the values file say the same. Nothing here talks to a cluster."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import z2jh_chart

from labs.classroom import kubeuids

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "course" / "class" / "z2jh-values.yaml"
EXCHANGE_CLAIM = ROOT / "course" / "class" / "nbgrader-exchange-pvc.yaml"
NAMESPACE = "gpulab-class"
HOST_DIR = "/var/lib/gpulab-class"  # on the kind node: the learners' homes and the exchange (kind has no RWX storage)
EXCHANGE_MOUNT = "/srv/nbgrader/exchange"

# What Pod Security "restricted" asks of every container (https://kubernetes.io/docs/concepts/security/
# pod-security-standards/): the hub's and the grader's pods are held to it as the learners' are.
_POD_SECURITY = {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 100, "fsGroup": 100,
                 "seccompProfile": {"type": "RuntimeDefault"}}
_CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}


def values(tag: str) -> dict[str, Any]:
    """Our values over the chart's defaults, with the image tag set as `helm --set singleuser.image.tag=` does."""
    ours = z2jh_chart.load_yaml(VALUES)
    merged = z2jh_chart.helm_merge(z2jh_chart.load_yaml(z2jh_chart.CHART_DEFAULTS), ours)
    return z2jh_chart.helm_merge(merged, {"singleuser": {"image": {"tag": tag}}})


def learner_image(vals: dict[str, Any]) -> str:
    return f"{z2jh_chart.get_config(vals, 'singleuser.image.name')}:{z2jh_chart.get_config(vals, 'singleuser.image.tag')}"


def hub_image(vals: dict[str, Any]) -> str:
    """The hub image is built beside the learner image and carries the same tag (course/class/build-image.sh)."""
    return f"gpulab-hub:{z2jh_chart.get_config(vals, 'singleuser.image.tag')}"


def kube_bytes(spec: str) -> str:
    """KubeSpawner's byte specification (``640M``: MiB, jupyterhub.traitlets.ByteSpecification) as a Kubernetes
    quantity (``640Mi``)."""
    units = {"K": "Ki", "M": "Mi", "G": "Gi", "T": "Ti"}
    return f"{spec[:-1]}{units[spec[-1]]}" if spec[-1:] in units else spec


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}


def hub_rbac() -> list[dict[str, Any]]:
    """The chart's hub Role (templates/hub/rbac.yaml): what KubeSpawner reads, makes and deletes."""
    meta = {"name": "hub", "namespace": NAMESPACE}
    rules = [{"apiGroups": [""], "resources": ["pods", "persistentvolumeclaims", "secrets", "services"],
              "verbs": ["get", "watch", "list", "create", "delete"]},
             {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "watch", "list"]}]
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
             "subjects": [{"kind": "ServiceAccount", "name": "hub", "namespace": NAMESPACE}],
             "roleRef": {"kind": "Role", "name": "hub", "apiGroup": "rbac.authorization.k8s.io"}}]


def hub(vals: dict[str, Any], admin_token: str) -> list[dict[str, Any]]:
    """The hub's Deployment (the proxy runs in its pod), its settings, its admin token and two Services."""
    settings = z2jh_chart.hub_settings(vals, NAMESPACE)
    labels = {"app": "jupyterhub", "component": "hub"}
    container = {
        "name": "hub", "image": hub_image(vals), "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "GPULAB_HUB_ADMIN_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub-admin",
                                                                                   "key": "token"}}},
                {"name": "GPULAB_HUB_CONNECT_URL", "value": f"http://hub.{NAMESPACE}.svc:8081"},
                {"name": "GPULAB_HUB_SPAWNER_CONFIG", "value": "/etc/gpulab-hub/spawner.json"}],
        "ports": [{"name": "http", "containerPort": 8000}, {"name": "hub", "containerPort": 8081}],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/gpulab-hub"},
                         {"name": "state", "mountPath": "/srv/jupyterhub"}],
        "readinessProbe": {"httpGet": {"path": "/hub/health", "port": "hub"}, "periodSeconds": 2},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": _CONTAINER_SECURITY,
    }
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hub-admin", "namespace": NAMESPACE},
         "stringData": {"token": admin_token}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hub", "namespace": NAMESPACE},
         "data": {"spawner.json": json.dumps(settings, indent=1, sort_keys=True)}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hub", "namespace": NAMESPACE},
         "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "serviceAccountName": "hub", "securityContext": _POD_SECURITY, "containers": [container],
                      "volumes": [{"name": "config", "configMap": {"name": "hub"}},
                                  {"name": "state", "emptyDir": {}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hub", "namespace": NAMESPACE},
         "spec": {"selector": labels, "ports": [{"name": "hub", "port": 8081, "targetPort": 8081}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "proxy-public", "namespace": NAMESPACE},
         "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]}},
    ]


def home_claim(user: str) -> str:
    """The claim KubeSpawner makes for ``user``'s home (its ``pvc_name_template``, claim-{user_server}, which the
    chart leaves as it is: singleuser.storage.dynamic.pvcNameTemplate is null) for a plain lower-case name."""
    assert z2jh_chart.get_config(values("x"), "singleuser.storage.dynamic.pvcNameTemplate") is None
    return f"claim-{user}"


def volumes(storage_class: str, learners: Sequence[str]) -> list[dict[str, Any]]:
    """Persistent volumes on the kind node for the claims KubeSpawner and the exchange make: kind's offline node
    image has no provisioner, so the tier makes them as an administrator would (host paths on the one node; Pod
    Security judges the pods, which name only their claims). One RWO volume of the values' capacity for each
    learner's home, bound to that learner's claim (its folder is made as the kubelet's fsGroup leaves a volume:
    ``host_folders``), and the exchange's RWX one, bound to its claim."""
    vals = z2jh_chart.load_yaml(VALUES)
    capacity = z2jh_chart.get_config(vals, "singleuser.storage.capacity")
    modes = z2jh_chart.get_config(vals, "singleuser.storage.dynamic.storageAccessModes")
    found = [{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"class-home-{user}"},
              "spec": {"capacity": {"storage": capacity}, "accessModes": modes, "storageClassName": storage_class,
                       "persistentVolumeReclaimPolicy": "Retain",
                       "claimRef": {"namespace": NAMESPACE, "name": home_claim(user)},
                       "hostPath": {"path": f"{HOST_DIR}/home-{user}"}}}
             for user in learners]
    claim = exchange_claim(storage_class)
    found.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "class-exchange"},
                  "spec": {"capacity": claim["spec"]["resources"]["requests"], "accessModes": ["ReadWriteMany"],
                           "storageClassName": storage_class, "persistentVolumeReclaimPolicy": "Retain",
                           "claimRef": {"namespace": NAMESPACE, "name": claim["metadata"]["name"]},
                           "hostPath": {"path": f"{HOST_DIR}/exchange"}}})
    return found


def host_folders(learners: Sequence[str]) -> str:
    """A shell command making the volumes' host folders on a kind node. A home as a volume with fsGroup support
    comes to its pod (the kubelet's ownership change for the pod's fsGroup, which is the learner's own uid here:
    course/class/z2jh-values.yaml, hub.extraConfig): owned by root, group the fsGroup, group-writable and setgid.
    The exchange's root belongs to the instructor (the images' uid 1000, which the grader runs as): nbgrader's
    release makes the root 1777 (``formgrade.CheckedRelease``) and the course's folders in the course folder
    ``gpulab``, which is the instructor's from the start (as ``class init`` makes it on one host: otherwise a learner
    could make it before the first release); learners write only where those let them."""
    homes = " && ".join(f"install -d -m 2770 -o 0 -g {kubeuids.learner_uid(user)} {HOST_DIR}/home-{user}"
                        for user in learners)
    return (f"{homes} && install -d -m 0755 -o {kubeuids.INSTRUCTOR_UID} -g 100 {HOST_DIR}/exchange "
            f"{HOST_DIR}/exchange/gpulab")


def exchange_claim(storage_class: str) -> dict[str, Any]:
    """course/class/nbgrader-exchange-pvc.yaml, with the cluster's StorageClass as its comment asks."""
    claim = z2jh_chart.load_yaml(EXCHANGE_CLAIM)
    claim["metadata"]["namespace"] = NAMESPACE
    claim["spec"]["storageClassName"] = storage_class
    return claim


def grader(vals: dict[str, Any]) -> dict[str, Any]:
    """The instructor's grader: the learner image with the exchange mounted, idle until the test runs nbgrader and
    `gpulab grade` in it. Grading replays on a lab cluster of its own, so it is given a learner's resources."""
    memory = z2jh_chart.get_config(vals, "singleuser.memory")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "grader", "namespace": NAMESPACE,
                                                           "labels": {"component": "grader"}},
            "spec": {"securityContext": _POD_SECURITY, "restartPolicy": "Never", "containers": [{
                "name": "grader", "image": learner_image(vals), "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "infinity"],
                "env": [{"name": "GPULAB_STATE_DIR", "value": "/home/jovyan/.local/state/gpulab"}],
                "resources": {"requests": {"cpu": "100m", "memory": kube_bytes(memory["guarantee"])},
                              "limits": {"memory": kube_bytes(memory["limit"])}},
                "volumeMounts": [{"name": "home", "mountPath": "/home/jovyan"},
                                 {"name": "exchange", "mountPath": EXCHANGE_MOUNT}],
                "securityContext": _CONTAINER_SECURITY}],
                "volumes": [{"name": "home", "emptyDir": {}},
                            {"name": "exchange", "persistentVolumeClaim": {"claimName": "nbgrader-exchange"}}]}}
