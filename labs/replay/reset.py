"""Resetting, before each replay: the lab on the grader's cluster put back to its start, as ``gpulab lab start``
leaves it, whatever the previous submission did; and the replay user's role. Nothing of one submission may reach the
next: finalizers are released, the lab's namespaces must be empty before the setup runs again, and they enforce
Pod Security."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster import errors
from cluster.backends import guard
from cluster.kube import restmapper
from cluster.kube.client import Client
from graders.view import dig
from labs import evidence, kubeapply, scope as scope_mod, steps
from labs.replay import allowed
from labs.replay.settle import WAIT_CAP_S
from labs.spec import LabSpec

REPLAY_USER = "gpulab:replay"
REPLAY_GROUP = "gpulab:replayers"
REPLAY_ROLE = "gpulab-replay"
# Pod Security level the lab namespaces of the grader's cluster enforce: no lab needs a privileged or host
# pod, and a submitted one is refused there (the learner's own cluster is theirs to run as they like).
POD_SECURITY = {"pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/enforce-version": "latest"}
# How long a reset may take to see the lab's namespaces empty before the grader's cluster counts as broken.
RESET_EMPTY_S = 60.0


def ensure_rbac(client: Client, namespaces: Sequence[str], crd_files: Sequence[Path] = ()) -> None:
    """The replay user's role: workload kinds in the lab's namespaces, nothing cluster-wide. A kind from a CRD
    the lab's setup has just installed is named as that CRD names it (discovery may not serve it yet); a kind
    neither served nor defined there cannot be created anyway and is left out."""
    rules: dict[str, list[str]] = {}
    defined = restmapper.crd_kinds(crd_files)
    for kind, api_version in allowed.NAMESPACED_KINDS.items():
        found = defined.get(api_version, {}).get(kind) or client.mapper.lookup(api_version, kind)
        if found is not None:
            rules.setdefault(allowed.group(api_version), []).append(found.resource)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": REPLAY_ROLE},
            "rules": [{"apiGroups": [g], "resources": sorted(r),
                       "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}
                      for g, r in rules.items()]}
    client.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{REPLAY_ROLE}", role)
    for ns in namespaces:
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": REPLAY_ROLE, "namespace": ns},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": REPLAY_ROLE},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": REPLAY_GROUP}]}
        client.apply(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{REPLAY_ROLE}", binding)


def reset(client: Client, spec: LabSpec) -> None:
    """The lab at its start, as ``gpulab lab start`` leaves it (scope to start values, then the setup steps).

    A lab namespace still being deleted (the lab was stopped) is waited for: the grader's cluster is ours."""
    deadline = time.monotonic() + WAIT_CAP_S * 3
    for ns in spec.scope.namespaces:
        while time.monotonic() < deadline:
            try:
                if dig(client.get(f"/api/v1/namespaces/{ns}"), "status", "phase") != "Terminating":
                    break
            except errors.NotFound:
                break
            time.sleep(0.3)
    release(client, spec)
    scope_mod.normalize(client, spec.scope)
    wait_empty(client, spec, RESET_EMPTY_S)
    for ns in spec.scope.namespaces:
        client.patch(f"/api/v1/namespaces/{ns}", {"metadata": {"labels": POD_SECURITY}})
    # The grader's cluster is the grader's own (GraderCluster's, or the admin kubeconfig of a gpulab cluster
    # passed with --replay-on); anything else counts as someone else's, and the setup steps refuse there.
    owner = guard.owner(client.kubeconfig) if client.kubeconfig is not None else guard.Owner(guard.ATTACH)
    ctx = steps.StepContext(client, spec.directory, evidence.fleet_facts(spec.fleet), owner)
    for step in spec.setup:
        step.run(ctx)
    ensure_rbac(client, spec.scope.namespaces, sorted((spec.directory / "setup").glob("*.y*ml")))


def leftovers(client: Client, spec: LabSpec) -> list[tuple[str, dict[str, Any]]]:
    """Every object of the kinds a lab may create still in the lab's namespaces (Events aside: deleting
    objects makes more), with its REST collection."""
    out = []
    for ns in spec.scope.namespaces:
        if not client.exists(f"/api/v1/namespaces/{ns}"):
            continue
        for api_version, kind in scope_mod.NAMESPACED:
            if kind == "Event":
                continue
            path = client.mapper.path(api_version, kind, namespace=ns)
            out += [(path, o) for o in client.get(path).get("items", [])
                    if not (kind == "ConfigMap" and dig(o, "metadata", "name") in scope_mod.KEEP_CONFIGMAPS)]
    return out


def release(client: Client, spec: LabSpec, *, delete: bool = False) -> None:
    """Take every finalizer off what the last submission left in the lab's namespaces, so the reset's deletes
    finish (an object held by a finalizer would keep its name, its pods or its quota for the next submission);
    with ``delete``, delete what is left at once as well (a pod a controller made while the reset deleted its
    owner, which the garbage collector would delete with the pod's own grace period)."""
    for path, obj in leftovers(client, spec):
        where = f"{path}/{dig(obj, 'metadata', 'name')}"
        if dig(obj, "metadata", "finalizers"):
            try:
                client.patch(where, {"metadata": {"finalizers": None}})
            except errors.NotFound:
                continue
        if delete:
            kubeapply.delete(client, where)


def wait_empty(client: Client, spec: LabSpec, timeout: float) -> None:
    """Until nothing of the last submission is left in the lab's namespaces (the garbage collector removes what
    the deleted workloads owned), releasing finalizers set meanwhile; a reset that cannot get there stops the
    grading rather than grade the next submission on someone else's objects."""
    deadline = time.monotonic() + timeout
    while True:
        left = leftovers(client, spec)
        if not left:
            return
        if time.monotonic() >= deadline:
            shown = ", ".join(f"{p.rsplit('/', 1)[-1]}/{dig(o, 'metadata', 'name')}" for p, o in left[:5])
            raise errors.ClusterError(f"the grader's cluster could not be reset for lab {spec.id}: {len(left)} "
                                      f"objects of an earlier submission are still there ({shown})",
                                      hint="grade again; if it persists, remove the grader's cluster "
                                           "(gpulab class grade starts a new one)")
        release(client, spec, delete=True)
        time.sleep(0.2)
