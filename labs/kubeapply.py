"""Applying manifests the way a learner's ``kubectl apply`` would, through our one Kubernetes client.

Server-side apply for every object; a Pod whose spec changed is deleted and created again (a pod's spec is
immutable, and a learner re-applying a fixed pod expects the new one). The apiserver's refusal of an object
is returned as a result, because for a learner it is a lesson, not a crash.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cluster import errors
from cluster.kube import restmapper
from cluster.kube.client import Client

REPLACE_TIMEOUT = 15.0


@dataclass(frozen=True)
class Applied:
    """One object's result: ``ok`` with ``action`` (created/configured/replaced), or the apiserver's refusal."""

    ref: str
    ok: bool
    message: str


def object_path(mapper: restmapper.RESTMapper, api_version: str, kind: str, name: str | None = None,
                namespace: str = "") -> str:
    """The object's API path from the server's discovery (a kind it does not serve is a ``ConfigError``)."""
    return mapper.path(api_version, kind, name, namespace or None)


def cluster_scoped(api_version: str, kind: str, mapper: restmapper.RESTMapper | None = None) -> bool:
    """Whether the kind is cluster-scoped; a kind the mapper does not know counts as cluster-scoped (the safe
    answer for the attach guard, which asks before contacting the cluster, with ``restmapper.recorded()``)."""
    return (mapper or restmapper.recorded()).namespaced(api_version, kind) is not True


def ref_of(obj: dict[str, Any], mapper: restmapper.RESTMapper | None = None) -> str:
    """``Kind namespace/name`` as kubectl names an object (namespace left out for cluster-scoped kinds)."""
    meta = obj.get("metadata") or {}
    scoped = cluster_scoped(str(obj.get("apiVersion", "")), str(obj.get("kind", "")), mapper)
    ns = "" if scoped else f"{meta.get('namespace') or 'default'}/"
    return f"{obj.get('kind', '?')} {ns}{meta.get('name', '?')}"


def apply_one(client: Client, obj: dict[str, Any]) -> Applied:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name") or not obj.get("apiVersion") or not obj.get("kind"):
        return Applied(ref_of(obj, client.mapper), False, "needs apiVersion, kind and metadata.name")
    ref = ref_of(obj, client.mapper)
    try:
        path = object_path(client.mapper, str(obj["apiVersion"]), str(obj["kind"]), str(meta["name"]),
                           str(meta.get("namespace") or ""))
    except errors.ConfigError as exc:
        return Applied(ref, False, "; ".join(exc.problems))
    existed = client.exists(path)
    try:
        client.apply(path, obj)
        return Applied(ref, True, "configured" if existed else "created")
    except errors.ApiError as exc:
        if not (existed and obj["kind"] == "Pod" and exc.status == 422):
            return Applied(ref, False, exc.api_message)
    # A pod's spec cannot change in place: replace it, as `kubectl replace --force` would. The old pod must be
    # gone before the new one is created, or the create lands on the terminating object.
    delete(client, path)
    deadline = time.monotonic() + REPLACE_TIMEOUT
    while client.exists(path):
        if time.monotonic() > deadline:
            return Applied(ref, False, f"the old pod was still being deleted after {REPLACE_TIMEOUT:.0f} s")
        time.sleep(0.1)
    try:
        client.create(path.rsplit("/", 1)[0], obj)
    except errors.ApiError as exc:
        return Applied(ref, False, exc.api_message)
    return Applied(ref, True, "replaced")


def apply_all(client: Client, objects: Iterable[object]) -> list[Applied]:
    out = []
    for obj in objects:
        if obj is None:
            continue
        if not isinstance(obj, dict):
            out.append(Applied("?", False, "a document that is not a Kubernetes object"))
            continue
        items = obj.get("items") if obj.get("kind") == "List" else None
        out.extend(apply_all(client, items) if isinstance(items, list) else [apply_one(client, obj)])
    return out


def delete(client: Client, path: str) -> bool:
    """Delete at once (pods without a grace period); False when it was already gone."""
    try:
        client.delete(path, gracePeriodSeconds=0)
        return True
    except errors.NotFound:
        return False
