"""Settling, the replay's last stage: the lab's own waits, for the learner's work, and the wait after the last act
until the scheduler has decided about every pod, so that the checks read an outcome; and the fingerprints that tell
whether anything may still change. A wait never fails: the checks judge the outcome."""

from __future__ import annotations

import json

from cluster import errors, poll
from cluster.gpustack import names
from cluster.kube.client import Client
from graders import LiveView
from graders.manifests import as_map
from graders.view import dig
from labs import evidence, steps
from labs.checks import live as live_checks
from labs.spec import LabSpec

WAIT_CAP_S = 20.0  # a replayed wait never takes longer than this, whatever the lab's own timeout
# A wait also ends when nothing it watches has changed for this long: the simulated stack reconciles a node
# within about 0.3 s of a label or config change (measured on the 2-core machine), so a learner's config that
# has not produced the outcome after a quiet second will not produce it.
QUIET_S = 1.0


def fingerprint(client: Client, spec: LabSpec) -> str:
    """What a wait watches, without volatile fields: the lab's pods and every node's labels and resources."""
    pods = []
    for ns in spec.scope.namespaces:
        for p in client.get(f"/api/v1/namespaces/{ns}/pods").get("items", []):
            conds = [(c.get("type"), c.get("status"), c.get("reason")) for c in dig(p, "status", "conditions") or []]
            pods.append((ns, dig(p, "metadata", "name"), dig(p, "spec", "nodeName"), dig(p, "status", "phase"), conds))
    nodes = []
    for n in client.get("/api/v1/nodes").get("items", []):
        labels = {k: v for k, v in as_map(dig(n, "metadata", "labels")).items() if k != names.GFD_TIMESTAMP}
        notes = {k: v for k, v in as_map(dig(n, "metadata", "annotations")).items() if k.startswith("gpulab.dev/")
                 and k != "gpulab.dev/heartbeat"}
        nodes.append((dig(n, "metadata", "name"), labels, notes, dig(n, "status", "allocatable"),
                      dig(n, "status", "capacity")))
    events = sorted({(dig(e, "involvedObject", "name"), e.get("reason"), e.get("message"))
                     for ns in spec.scope.namespaces
                     for e in client.get(f"/api/v1/namespaces/{ns}/events").get("items", [])}, key=str)
    return json.dumps([sorted(pods, key=str), nodes, events], sort_keys=True, default=str)


def outcome_fingerprint(client: Client, spec: LabSpec) -> str:
    """``fingerprint`` and the GPU Operator's pods (an operand's pods still going or coming after the replay
    changed the operator): what may still change a check's result after the last act."""
    try:
        operands = client.get(f"/api/v1/namespaces/{names.NAMESPACE}/pods").get("items", [])
    except errors.NotFound:
        operands = []
    pods = sorted((str(dig(p, "metadata", "name")), dig(p, "spec", "nodeName"), dig(p, "status", "phase"),
                   bool(dig(p, "metadata", "deletionTimestamp"))) for p in operands)
    return fingerprint(client, spec) + json.dumps(pods, default=str)


def still_changing(client: Client) -> bool:
    """A change under way that may be quiet for a while yet has an outcome still coming: a MIG manager at work, or
    the GPU Operator's namespace or pods being deleted (an operator removal does not wait for the namespace
    controller, which takes a few seconds to delete what is in it)."""
    if mig_pending(client):
        return True
    try:
        if dig(client.get(f"/api/v1/namespaces/{names.NAMESPACE}"), "metadata", "deletionTimestamp"):
            return True
    except errors.NotFound:
        return False
    return any(dig(p, "metadata", "deletionTimestamp")
               for p in client.get(f"/api/v1/namespaces/{names.NAMESPACE}/pods").get("items", []))


def wait(client: Client, spec: LabSpec, step: steps.Wait) -> None:
    """The lab's wait, for the learner's work: it ends when the rule passes; for a pod wait, also when the
    scheduler has decided about every pod of the lab (a pod it found no place for will not get one by waiting);
    when nothing has changed for ``QUIET_S`` (the learner's config will not get there); or after ``WAIT_CAP_S``.
    It never fails: the checks judge the outcome."""
    ev = evidence.Evidence({}, (), evidence.fleet_facts(spec.fleet), LiveView(client))
    # A wait for pods to be gone (count 0) is not over when the scheduler has decided: they are still leaving.
    pod_wait = isinstance(step.rule, live_checks.PodRule) and step.rule.count != 0

    def over(_: None = None) -> bool:
        return step.rule.evaluate(ev).passed or (pod_wait and decided(client, spec))

    poll.until(over(), lambda _: over(), bool, wait=min(step.timeout, WAIT_CAP_S), interval=0.1,
               changed=lambda _: fingerprint(client, spec), quiet=QUIET_S, busy=lambda: mig_pending(client))


def mig_pending(client: Client) -> bool:
    """A MIG manager at work (state ``pending``) is quiet while it resets GPUs, yet its outcome is still coming."""
    return any(as_map(dig(n, "metadata", "labels")).get(names.MIG_CONFIG_STATE) == "pending"
               for n in client.get("/api/v1/nodes").get("items", []))


def pods(client: Client, spec: LabSpec, cap: float) -> None:
    """After the last act: wait until the scheduler has decided about every pod of the lab (bound and started,
    or unschedulable with its FailedScheduling event recorded), twice in a row, so the checks read an outcome."""
    def look(in_a_row: int) -> int:
        return in_a_row + 1 if decided(client, spec, events=True) else 0

    poll.until(look(0), look, lambda in_a_row: in_a_row >= 2, wait=cap, interval=0.1)


def decided(client: Client, spec: LabSpec, *, events: bool = False) -> bool:
    """Every workload of the lab has its pods, and the scheduler has decided about each pod (and, with
    ``events``, recorded why for those it could not place)."""
    for ns in spec.scope.namespaces:
        for group, plural in (("apps/v1", "deployments"), ("apps/v1", "replicasets")):
            for w in client.get(f"/apis/{group}/namespaces/{ns}/{plural}").get("items", []):
                want = dig(w, "spec", "replicas")
                if (dig(w, "status", "observedGeneration") or 0) < (dig(w, "metadata", "generation") or 0) or \
                        (dig(w, "status", "replicas") or 0) < (1 if want is None else want):
                    return False
        for job in client.get(f"/apis/batch/v1/namespaces/{ns}/jobs").get("items", []):
            st = as_map(job.get("status"))
            if not any(st.get(k) for k in ("active", "succeeded", "failed", "ready")):
                return False
        waiting: set[str] = set()
        for p in client.get(f"/api/v1/namespaces/{ns}/pods").get("items", []):
            reasons = {c.get("reason") for c in dig(p, "status", "conditions") or [] if c.get("type") == "PodScheduled"
                       and c.get("status") == "False"}
            if "Unschedulable" in reasons:
                waiting.add(str(dig(p, "metadata", "name")))
            elif "SchedulingGated" in reasons:
                continue
            elif not dig(p, "spec", "nodeName") or dig(p, "status", "phase") in (None, "", "Pending"):
                return False
        if events and waiting:
            listed = client.get(f"/api/v1/namespaces/{ns}/events").get("items", [])
            told = {dig(e, "involvedObject", "name") for e in listed if e.get("reason") == "FailedScheduling"}
            if waiting - told:
                return False
    return True
