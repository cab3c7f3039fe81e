"""Evidence bundles: one versioned JSON file with a learner's manifests and the cluster state a lab's checks read.

``snapshot`` records what the checks need (nodes, the pods, events, claims, ConfigMaps and quotas of the lab's
namespaces, slices, device classes, the ClusterPolicy) plus a sketch of every other pod and claim (enough to
know what each node already gives away). Volatile fields (resourceVersion, uid, managedFields, timestamps,
event counts) are dropped and lists are sorted, so the same state always gives the same bytes. ``load``
refuses anything that is not a bundle we can read, with the reason; ``read`` turns that into a ``Finding``
so that batch grading never crashes on a hostile file. ``graders.bundleview.BundleView`` serves a bundle to
checks through the ``ClusterView`` protocol. ``write`` records who wrote the file (``graders.producer``: the
system's word); on reading that is the learner's claim, which ``owner_note`` sets beside the file's owner.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cluster import errors, gpustack, inside
from cluster.kube import client as kube
from graders import bundleview, findings, live_messages, producer as producer_mod, view as view_mod
from graders.manifests import as_list, as_map, as_str
from graders.view import Obj, dig

log = logging.getLogger(__name__)

KIND = "gpulab.dev/EvidenceBundle"
# Version 2 added ``actions``: what the learner did besides the files (node labels, ClusterPolicy fields, faults,
# the operator), which grading replays on its own cluster. A version-1 bundle reads with no actions.
# ``producer`` (who wrote the file) came without a new version: it changes no grade, and readers of every version
# pass over a top-level key they do not know, so a grader one release behind still reads a bundle that has one
# (a bump would refuse it as too new); a bundle without one, as every older one is, reads with producer None.
BUNDLE_VERSION = 2  # bump when the layout changes; readers accept OLDEST_READABLE..BUNDLE_VERSION
OLDEST_READABLE = 1
MAX_ACTIONS = 200
ACTION_KINDS = ("label", "policy", "fault", "operator", "restart")
MAX_BYTES = 16 * 1024 * 1024
MAX_MANIFESTS = 500
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_DEPTH = 64
OPERATOR_NAMESPACE = gpustack.names.NAMESPACE

LIST_KEYS = ("nodes", "pods", "otherPods", "events", "resourceClaims", "otherClaims", "resourceSlices",
             "deviceClasses", "configMaps", "resourceQuotas")
_NAMESPACED = {"pods", "otherPods", "events", "resourceClaims", "otherClaims", "configMaps", "resourceQuotas"}
_NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_VOLATILE = frozenset({
    "uid", "resourceVersion", "managedFields", "creationTimestamp", "deletionTimestamp", "generation", "selfLink",
    "lastHeartbeatTime", "lastTransitionTime", "lastProbeTime", "startTime", "startedAt", "finishedAt",
    "lastTimestamp", "firstTimestamp", "eventTime", "lastObservedTime", "containerID", "imageID",
    "podIP", "podIPs", "hostIP", "hostIPs",
})
_VOLATILE_LABELS = frozenset({"nvidia.com/gfd.timestamp"})
_VOLATILE_ANNOTATIONS = frozenset({"gpulab.dev/heartbeat", "kubectl.kubernetes.io/last-applied-configuration"})
_SKIPPED_CONFIGMAPS = frozenset({"kube-root-ca.crt"})


class BundleError(errors.ConfigError):
    """A bundle that cannot be used; ``key`` and ``fields`` say why in ``graders.live_messages`` terms."""

    def __init__(self, source: str, key: str, **fields: object) -> None:
        self.key = key
        self.said = live_messages.say(key, **fields)
        super().__init__(source, [self.said.message], hint=self.said.hint)

    def finding(self) -> findings.Finding:
        return findings.Finding(rule=self.said.rule, severity=self.said.severity, message=self.said.message,
                                hint=self.said.hint, file=self.source, line=0, column=0, section=self.said.section)


@dataclass(frozen=True)
class Bundle:
    """A bundle that passed validation."""

    lab: str
    version: int
    namespaces: tuple[str, ...]
    manifests: Mapping[str, str]
    cluster: Mapping[str, Any]
    actions: tuple[Mapping[str, Any], ...] = ()
    producer: producer_mod.Producer | None = None  # the bundle's claim of who wrote it: shown, never trusted

    def view(self) -> view_mod.ClusterView:
        """The cluster as the learner's bundle describes it: the learner's claim (for explaining, never scoring)."""
        return bundleview.BundleView(self.cluster, self.namespaces)

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": KIND, "bundleVersion": self.version, "lab": self.lab,
               "scope": {"namespaces": list(self.namespaces)}, "manifests": dict(self.manifests),
               "cluster": dict(self.cluster)}
        if self.version >= 2:
            out["actions"] = [dict(a) for a in self.actions]
        if self.producer is not None:
            out["producer"] = self.producer.to_dict()
        return out


# -- recording ------------------------------------------------------------------------------------------

def snapshot(client: kube.Client, namespaces: Sequence[str], manifests: Mapping[str, str], lab: str,
             actions: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Record the learner's manifests, ``actions`` (replayed by grading) and the state of ``namespaces`` (plus
    cluster-wide GPU state, kept as the learner's claim)."""
    scope = sorted(set(namespaces))
    view = view_mod.LiveView(client)
    live_pods = view.pods(None)
    live_claims = view.resource_claims(None)
    maps = [c for ns in sorted(set(scope) | {OPERATOR_NAMESPACE}) for c in view.configmaps(ns)
            if view_mod.name_of(c) not in _SKIPPED_CONFIGMAPS]
    policy = view.cluster_policy()
    cluster = {
        "nodes": [normalise(n) for n in view.nodes()],
        "pods": [normalise(p) for p in live_pods if view_mod.namespace_of(p) in scope],
        "otherPods": [pod_sketch(p) for p in live_pods if view_mod.namespace_of(p) not in scope],
        "events": events_in(view, scope),
        "resourceClaims": [normalise(c) for c in live_claims if view_mod.namespace_of(c) in scope],
        "otherClaims": [claim_sketch(c) for c in live_claims if view_mod.namespace_of(c) not in scope],
        "resourceSlices": [normalise(s) for s in view.resource_slices()],
        "deviceClasses": [normalise(c) for c in view.device_classes()],
        "configMaps": [normalise(c) for c in maps],
        "resourceQuotas": [normalise(q) for ns in scope for q in view.resource_quotas(ns)],
        "clusterPolicy": normalise(policy) if policy is not None else None,
    }
    return {"kind": KIND, "bundleVersion": BUNDLE_VERSION, "lab": lab, "scope": {"namespaces": scope},
            "manifests": {str(k): str(v) for k, v in sorted(manifests.items())}, "cluster": cluster,
            "actions": [dict(a) for a in actions]}


def normalise(obj: Any) -> Any:
    """A copy without the fields that change when nothing meaningful did."""
    if isinstance(obj, dict):
        out = {k: normalise(v) for k, v in obj.items() if k not in _VOLATILE}
        meta = out.get("metadata")
        if isinstance(meta, dict):
            for key, drop in (("labels", _VOLATILE_LABELS), ("annotations", _VOLATILE_ANNOTATIONS)):
                if isinstance(meta.get(key), dict):
                    meta[key] = {k: v for k, v in meta[key].items() if k not in drop}
        return out
    if isinstance(obj, list):
        return [normalise(v) for v in obj]
    return obj


def pod_sketch(pod: Obj) -> Obj:
    """What the scheduler counts of a pod outside the lab's namespaces: node, phase and resource requests."""
    def containers(group: str) -> list[Obj]:
        return [{"name": as_str(dig(c, "name")), "resources": as_map(dig(c, "resources"))}
                for c in as_list(dig(pod, "spec", group))]
    spec: Obj = {"nodeName": as_str(dig(pod, "spec", "nodeName")), "containers": containers("containers"),
                 "initContainers": containers("initContainers")}
    if isinstance(dig(pod, "spec", "overhead"), dict):
        spec["overhead"] = dig(pod, "spec", "overhead")
    return {"metadata": {"name": view_mod.name_of(pod), "namespace": view_mod.namespace_of(pod)}, "spec": spec,
            "status": {"phase": as_str(dig(pod, "status", "phase"))}}


def claim_sketch(claim: Obj) -> Obj:
    """Which devices a claim outside the lab's namespaces holds."""
    out: Obj = {"metadata": {"name": view_mod.name_of(claim), "namespace": view_mod.namespace_of(claim)}}
    if isinstance(dig(claim, "status", "allocation"), dict):
        out["status"] = {"allocation": normalise(dig(claim, "status", "allocation"))}
    return out


def events_in(view: view_mod.ClusterView, namespaces: Iterable[str]) -> list[Obj]:
    """Events of the scope, reduced to what they say, oldest first; a repeated event is kept at its last time."""
    reduced: list[Obj] = []
    for ns in namespaces:
        for event in view.events(ns):
            involved = as_map(event.get("involvedObject"))
            reduced.append({
                "metadata": {"namespace": ns},
                "involvedObject": {k: as_str(involved.get(k)) for k in ("kind", "name", "namespace")},
                "reason": as_str(event.get("reason")), "message": as_str(event.get("message")),
                "type": as_str(event.get("type")),
                "source": as_str(dig(event, "source", "component")) or as_str(event.get("reportingComponent")),
            })
    seen: set[str] = set()
    kept: list[Obj] = []
    for event in reversed(reduced):
        key = json.dumps(event, sort_keys=True)
        if key not in seen:
            seen.add(key)
            kept.append(event)
    return kept[::-1]


def dumps(data: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a bundle: sorted keys, one-space indent, UTF-8, trailing newline."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1, separators=(",", ": "), allow_nan=False)
    return (text + "\n").encode("utf-8")


def write(path: str | Path, data: Mapping[str, Any]) -> Path:
    """Write a bundle with its ``producer``, this process (one in ``data`` is replaced); raises ``BundleError``
    when it would be larger than a reader accepts."""
    out = Path(path)
    payload = dumps({**data, "producer": producer_mod.current().to_dict()})
    if len(payload) > MAX_BYTES:
        raise BundleError(str(out), "bundle/too-large", size=_human(len(payload)), limit=_human(MAX_BYTES))
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written beside its place under a new name and renamed over it: a link at ``out`` (the folder is a learner's)
    # is replaced, never written through, and no planted ``.tmp`` link is followed either.
    inside.write(out.parent, out.name, payload)
    log.info("wrote evidence bundle %s (%s)", out, _human(len(payload)))
    return out


# -- reading ----------------------------------------------------------------------------------------------

def read(path: str | Path) -> tuple[Bundle | None, tuple[findings.Finding, ...]]:
    """Load a bundle, or None and a finding that says why it cannot be used (never raises on bad input)."""
    try:
        return load(path), ()
    except BundleError as exc:
        return None, (exc.finding(),)


def load(path: str | Path) -> Bundle:
    """Load and validate a bundle file; raises ``BundleError`` (too old, too new, damaged, hostile)."""
    name = str(path)
    try:
        size = Path(path).stat().st_size
        if size > MAX_BYTES:
            raise BundleError(name, "bundle/too-large", size=_human(size), limit=_human(MAX_BYTES))
        with Path(path).open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise BundleError(name, "bundle/unreadable", problem=exc.strerror or str(exc)) from exc
    return loads(data, name)


def loads(data: bytes, name: str = "<bundle>") -> Bundle:
    if len(data) > MAX_BYTES:
        raise BundleError(name, "bundle/too-large", size=_human(len(data)), limit=_human(MAX_BYTES))
    raw = _parse_json(data, name)
    if not isinstance(raw, dict) or raw.get("kind") != KIND:
        raise BundleError(name, "bundle/not-a-bundle", problem=f"no `kind: {KIND}`")
    version = raw.get("bundleVersion")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BundleError(name, "bundle/not-a-bundle", problem="`bundleVersion` is missing or not a whole number")
    if version < OLDEST_READABLE:
        raise BundleError(name, "bundle/too-old", found=version, oldest=OLDEST_READABLE, newest=BUNDLE_VERSION)
    if version > BUNDLE_VERSION:
        raise BundleError(name, "bundle/too-new", found=version, newest=BUNDLE_VERSION)
    problems = validate(raw)
    if problems:
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise BundleError(name, "bundle/invalid", problems=shown)
    return Bundle(lab=raw["lab"], version=version, namespaces=tuple(raw["scope"]["namespaces"]),
                  manifests=MappingProxyType(dict(raw["manifests"])), cluster=MappingProxyType(dict(raw["cluster"])),
                  actions=tuple(MappingProxyType(dict(a)) for a in raw.get("actions", [])),
                  producer=producer_mod.from_dict(raw.get("producer")))


def owner_note(path: str | Path) -> str:
    """``graders.producer.note`` for the bundle file at ``path``: the producer it claims against the file's owner.
    The file is opened without following a link and the owner read from the open file (the owner of the bytes
    read); "" when there is no readable bundle there (the steps that use it say why)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        found = loads(data, str(path))
    except BundleError:
        return ""
    return producer_mod.note(found.producer, info.st_uid)


def _parse_json(data: bytes, name: str) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(name, "bundle/not-json", problem=f"not UTF-8 text (byte {exc.start})") from exc
    try:
        raw = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RecursionError as exc:
        raise BundleError(name, "bundle/invalid", problems="nested too deeply") from exc
    except ValueError as exc:
        raise BundleError(name, "bundle/not-json", problem=str(exc)[:200]) from exc
    where = _lone_surrogate(raw)
    if where is not None:
        raise BundleError(name, "bundle/not-json", problem=f"{where} holds a lone surrogate escape (such as "
                          "\\ud800), which is not a character: the text cannot be written as UTF-8")
    return raw


def _lone_surrogate(value: object) -> str | None:
    """The path of the first text (key or value) holding a lone UTF-16 surrogate, which JSON's ``\\uXXXX``
    escapes can spell but no UTF-8 text can hold; None when there is none. Iterative: the depth is unchecked yet."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return None
    except (UnicodeEncodeError, RecursionError, ValueError):
        pass
    stack: list[tuple[object, str]] = [(value, "(root)")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str) and not _encodable(node):
            return path
        if isinstance(node, dict):
            for key, child in node.items():
                if not _encodable(key):
                    return f"{path} (a key)"
                step = f"[{key!r}]" if "." in key or not key else (f".{key}" if path != "(root)" else key)
                stack.append((child, f"{path}{step}" if step.startswith("[") or path != "(root)" else step))
        elif isinstance(node, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node))
    return "(root)"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a number JSON allows")


def validate(raw: Mapping[str, Any]) -> list[str]:
    """Every shape problem of a bundle's body, each as ``path: problem``."""
    problems: list[str] = []
    if _depth(raw) > MAX_DEPTH:
        return [f"nested deeper than {MAX_DEPTH} levels"]
    if not isinstance(raw.get("lab"), str) or not raw["lab"]:
        problems.append("lab: must be the lab's id (text)")
    namespaces = dig(raw, "scope", "namespaces")
    if not isinstance(namespaces, list) or not all(isinstance(n, str) and _NAMESPACE_RE.match(n) for n in namespaces):
        problems.append("scope.namespaces: must be a list of namespace names")
        namespaces = []
    problems.extend(_check_manifests(raw.get("manifests")))
    problems.extend(_check_actions(raw.get("actions"), raw.get("bundleVersion")))
    problems.extend(producer_mod.problems(raw.get("producer")))
    cluster = raw.get("cluster")
    if not isinstance(cluster, dict):
        return problems + ["cluster: must be an object"]
    for key in LIST_KEYS:
        problems.extend(_check_list(cluster.get(key), f"cluster.{key}", key in _NAMESPACED, set(namespaces), key))
    policy = cluster.get("clusterPolicy")
    if policy is not None and not (isinstance(policy, dict) and isinstance(dig(policy, "metadata", "name"), str)):
        problems.append("cluster.clusterPolicy: must be null or an object with metadata.name")
    unknown = sorted(set(cluster) - set(LIST_KEYS) - {"clusterPolicy"})
    if unknown:
        problems.append(f"cluster: unknown keys {', '.join(unknown[:5])}")
    return problems


def _check_manifests(manifests: object) -> list[str]:
    if not isinstance(manifests, dict):
        return ["manifests: must be an object of file name to text"]
    if len(manifests) > MAX_MANIFESTS:
        return [f"manifests: more than {MAX_MANIFESTS} files"]
    problems = []
    for key, text in manifests.items():
        if not isinstance(text, str):
            problems.append(f"manifests[{key!r}]: must be text")
        elif len(text.encode("utf-8", "surrogatepass")) > MAX_MANIFEST_BYTES:
            problems.append(f"manifests[{key!r}]: larger than {_human(MAX_MANIFEST_BYTES)}")
    return problems


def _check_actions(actions: object, version: object) -> list[str]:
    """The shape of ``actions`` only; which actions a lab allows is decided when they are replayed."""
    if version == 1:
        return [] if actions is None else ["actions: version-1 bundles have none; write bundleVersion 2"]
    if not isinstance(actions, list):
        return ["actions: must be a list (write [] when there are none)"]
    if len(actions) > MAX_ACTIONS:
        return [f"actions: more than {MAX_ACTIONS}"]
    problems = []
    for i, action in enumerate(actions):
        if not isinstance(action, dict) or action.get("action") not in ACTION_KINDS:
            problems.append(f"actions[{i}]: must be an object whose `action` is one of {', '.join(ACTION_KINDS)}")
        if len(problems) > 20:
            break
    return problems


def _check_list(items: object, path: str, namespaced: bool, scope: set[str], key: str) -> list[str]:
    if not isinstance(items, list):
        return [f"{path}: must be a list"]
    problems = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
            problems.append(f"{path}[{i}]: must be an object with metadata")
            continue
        if key != "events" and not isinstance(dig(item, "metadata", "name"), str):
            problems.append(f"{path}[{i}].metadata.name: must be text")
        ns = dig(item, "metadata", "namespace")
        if namespaced and not isinstance(ns, str):
            problems.append(f"{path}[{i}].metadata.namespace: must be text")
        elif namespaced and key in ("pods", "events", "resourceClaims", "resourceQuotas") and ns not in scope:
            problems.append(f"{path}[{i}]: namespace {ns!r} is outside the bundle's scope")
        if len(problems) > 20:
            break
    return problems


def _depth(value: object) -> int:
    """Nesting depth without recursion (a hostile file must not exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _human(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"
