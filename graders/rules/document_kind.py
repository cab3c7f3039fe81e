"""Rule ``document-kind``: every document is an object with an apiVersion and kind the cluster serves.

A document without ``apiVersion`` or ``kind`` cannot be applied; a known kind under the wrong group or
version (``PriorityClass`` in ``v1``) gives ``no matches for kind``. DRA objects are served as
``resource.k8s.io/v1`` since Kubernetes 1.34; the beta versions are deprecated and only served where a
cluster turns them on. Device-plugin and mig-parted configs are recognised by their fields. Anything else
is reported as information, so a learner knows it was read but not checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from graders import findings, manifests, source
from graders.rules import base

RULE_ID = "document-kind"

_DRA = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")
SERVED: Mapping[str, tuple[str, ...]] = {
    **{k: ("v1",) for k in ("Pod", "PodTemplate", "ConfigMap", "Secret", "ResourceQuota", "LimitRange", "Namespace",
                            "Service", "ServiceAccount", "Node", "ReplicationController", "PersistentVolumeClaim",
                            "PersistentVolume", "Event", "Endpoints", "List")},
    **{k: ("apps/v1",) for k in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision")},
    **{k: ("batch/v1",) for k in ("Job", "CronJob")},
    **{k: ("rbac.authorization.k8s.io/v1",) for k in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")},
    **{k: _DRA for k in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")},
    "DeviceTaintRule": ("resource.k8s.io/v1alpha3",),
    "PriorityClass": ("scheduling.k8s.io/v1",),
    "RuntimeClass": ("node.k8s.io/v1",),
    "PodDisruptionBudget": ("policy/v1",),
    "HorizontalPodAutoscaler": ("autoscaling/v2", "autoscaling/v1"),
    "NetworkPolicy": ("networking.k8s.io/v1",),
    "CustomResourceDefinition": ("apiextensions.k8s.io/v1",),
    "KubeletConfiguration": ("kubelet.config.k8s.io/v1beta1",),
    "ClusterPolicy": ("nvidia.com/v1",),
    "NVIDIADriver": ("nvidia.com/v1alpha1",),
    "ServiceMonitor": ("monitoring.coreos.com/v1",),
    "PrometheusRule": ("monitoring.coreos.com/v1",),
}


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    doc_type = manifests.classify(doc)
    if not isinstance(doc.data, dict):
        yield base.emit(doc, (), "document-kind/not-an-object", found=_shape(doc.data))
        return
    if doc_type is manifests.DocType.UNKNOWN:
        yield base.emit(doc, (), "document-kind/unrecognised", keys=", ".join(sorted(map(str, doc.data))[:6]))
        return
    if doc_type is not manifests.DocType.OBJECT:
        return
    api_version, kind = doc.data.get("apiVersion"), doc.data.get("kind")
    if not isinstance(kind, str) or not kind:
        yield base.emit(doc, ("kind",) if "kind" in doc.data else (), "document-kind/missing-kind")
        return
    if not isinstance(api_version, str) or not api_version:
        yield base.emit(doc, ("apiVersion",) if "apiVersion" in doc.data else (), "document-kind/missing-api-version",
                        kind=kind, served=" or ".join(SERVED.get(kind, ("<group>/<version>",))))
        return
    served = SERVED.get(kind)
    if served is None:
        yield base.emit(doc, ("kind",), "document-kind/unchecked-kind", kind=kind, api_version=api_version)
    elif api_version not in served:
        yield base.emit(doc, ("apiVersion",), "document-kind/wrong-api-version", kind=kind, api_version=api_version,
                        served=" or ".join(served))
    elif api_version in _DRA[1:]:
        yield base.emit(doc, ("apiVersion",), "document-kind/deprecated-api-version", kind=kind,
                        api_version=api_version, preferred=_DRA[0])


def _shape(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, (int, float)):
        return "a number"
    return "empty"
