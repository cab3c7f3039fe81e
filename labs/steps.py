"""Setup and solve steps: small actions on the cluster, each a frozen object with one ``run``.

``lab.yaml`` writes a step as a one-key mapping: ``{apply: setup/filler.yaml}``, ``{operator: installed}``,
``{label: {node, key, value}}``, ``{fault: {node, kind, gpu, present}}``, ``{policy: <patch of spec>}``,
``{restart: <operand DaemonSet>}`` (a rollout restart),
``{delete: <API path>}`` or ``{wait: {<cluster check>: {...}, timeout: 30}}``. A step that fails is our
failure (the lab could not be set up or solved), raised as a ``ClusterError`` that names the step.

A step that changes anything outside the lab's own namespaces (cluster-scoped or NVIDIA-named objects, node
labels, faults, the ClusterPolicy) says so in ``cluster_change`` and checks the cluster's owner first: on an
attached cluster (someone else's) it refuses before it changes anything (``cluster.backends.guard``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from cluster import errors
from cluster.backends import guard, kind as kind_backend
from cluster.kube.client import Client
from cluster import gpustack
from cluster.gpustack import names
from graders import FleetFacts
from graders import LiveView
from labs import evidence, kubeapply
from labs.checks import common, live
from labs.classroom import solutions
from labs.spec import OPERATOR_STATES, Problems, Rule



@dataclass(frozen=True)
class StepContext:
    client: Client
    lab_dir: Path
    fleet: FleetFacts
    owner: guard.Named = guard.Owner(guard.ATTACH)  # who made the cluster; unknown counts as someone else's


class Step(Protocol):
    def run(self, ctx: StepContext) -> None: ...

    def describe(self) -> str: ...

    def cluster_change(self) -> str | None:
        """What this step would change outside the lab's namespaces (refused on attach), or None."""
        ...


def _guard(ctx: StepContext, step: Step) -> None:
    change = step.cluster_change()
    if change:
        guard.refuse_if_attach(ctx.owner, change)


def nvidia_named(api_version: str, namespace: str) -> bool:
    """Objects of the NVIDIA API groups or in the GPU Operator's namespace: on a real cluster, the real GPU stack."""
    group = api_version.rpartition("/")[0]
    return group == "nvidia.com" or group.endswith(".nvidia.com") or namespace == names.NAMESPACE


def path_change(path: str) -> str | None:
    """``delete <path>`` when the API path names a cluster-scoped or NVIDIA-named object, else None."""
    parts = path.strip("/").split("/")
    api_version = parts[1] if parts[:1] == ["api"] else "/".join(parts[1:3])
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    namespaced = len(rest) >= 3 and rest[0] == "namespaces"
    namespace = rest[1] if namespaced else ""
    if namespaced and not nvidia_named(api_version, namespace):
        return None
    return f"delete {path}"


def object_change(obj: object) -> str | None:
    """``apply <kind> <name>`` for a cluster-scoped or NVIDIA-named object of a lab file, else None."""
    if not isinstance(obj, dict):
        return None
    kind, api_version = str(obj.get("kind", "")), str(obj.get("apiVersion", ""))
    raw_meta = obj.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    name, namespace = str(meta.get("name", "?")), str(meta.get("namespace") or "")
    if kubeapply.cluster_scoped(api_version, kind):
        return f"apply the cluster-scoped {kind} {name}"
    if nvidia_named(api_version, namespace):
        return f"apply {kind} {namespace + '/' if namespace else ''}{name} (part of the NVIDIA GPU stack)"
    return None


def load_objects(path: Path) -> list[object]:
    """The documents of one of our own lab files (trusted, small)."""
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise errors.ConfigError(str(path), [f"cannot be read: {exc}"]) from exc


@dataclass(frozen=True)
class Apply:
    """Apply a lab file; ``refused`` names objects the apiserver must refuse (a quota at work)."""

    file: str
    refused: tuple[str, ...] = ()
    lab_dir: Path | None = field(default=None, compare=False)  # where ``file`` is, to say what it would change

    def run(self, ctx: StepContext) -> None:
        objects = load_objects(ctx.lab_dir / self.file)
        for obj in objects:
            change = object_change(obj)
            if change:
                guard.refuse_if_attach(ctx.owner, change)
        results = kubeapply.apply_all(ctx.client, objects)
        bad = [f"{r.ref}: {r.message}" for r in results if r.ok == (r.ref in self.refused)]
        if bad:
            raise errors.ClusterError(f"applying {self.file} failed: " + "; ".join(bad),
                                      hint="gpulab status (is the cluster up?), then gpulab lab reset")

    def describe(self) -> str:
        return f"apply {self.file}"

    def cluster_change(self) -> str | None:
        if self.lab_dir is None or not os.path.isfile(self.lab_dir / self.file):  # withheld: nothing to tell
            return None
        return next(filter(None, map(object_change, load_objects(self.lab_dir / self.file))), None)


@dataclass(frozen=True)
class Operator:
    installed: bool

    def run(self, ctx: StepContext) -> None:
        _guard(ctx, self)
        ensure_operator(ctx.client, self.installed)

    def describe(self) -> str:
        return "install the GPU Operator" if self.installed else "remove the GPU Operator"

    def cluster_change(self) -> str | None:
        return operator_change(self.installed)


def operator_change(installed: bool) -> str:
    what = f"the {names.NAMESPACE} namespace, the {names.CRD_NAME} CRD, the ClusterPolicy and the GPU nodes' labels"
    return f"install the GPU Operator ({what})" if installed else f"remove the GPU Operator (deleting {what})"


def ensure_operator(client: Client, installed: bool) -> None:
    """Install or remove the operator. A removal does not wait the ~5 s the namespace controller takes to delete
    the ``gpu-operator`` namespace: nothing a lab checks is in it, and an install waits for it to be gone."""
    if installed and gpustack.policy_state(client) is None:
        gpustack.install(client, wait=True, timeout=120)
    elif not installed and gpustack.present(client):
        gpustack.uninstall(client, wait_namespace=False)


@dataclass(frozen=True)
class Label:
    node: str
    key: str
    value: str | None

    def run(self, ctx: StepContext) -> None:
        _guard(ctx, self)
        current = (ctx.client.get(f"/api/v1/nodes/{self.node}")["metadata"].get("labels") or {}).get(self.key)
        if current != self.value:
            ctx.client.patch(f"/api/v1/nodes/{self.node}", {"metadata": {"labels": {self.key: self.value}}})

    def describe(self) -> str:
        return f"label {self.node} {self.key}={self.value}" if self.value else f"unlabel {self.node} {self.key}"

    def cluster_change(self) -> str | None:
        return f"{self.describe()} (a node label)"


@dataclass(frozen=True)
class Fault:
    node: str
    kind: str
    gpu: int | None
    present: bool

    def run(self, ctx: StepContext) -> None:
        _guard(ctx, self)
        gpustack.set_fault(ctx.client, self.node, self.kind, self.gpu, self.present)

    def describe(self) -> str:
        return f"{'inject' if self.present else 'clear'} fault {self.kind} on {self.node}"

    def cluster_change(self) -> str | None:
        return f"{self.describe()} (an annotation on the node)"


@dataclass(frozen=True)
class Policy:
    patch: Mapping[str, Any]

    def run(self, ctx: StepContext) -> None:
        _guard(ctx, self)
        ctx.client.patch(names.POLICY, {"spec": dict(self.patch)})

    def describe(self) -> str:
        return f"patch ClusterPolicy spec with {dict(self.patch)}"

    def cluster_change(self) -> str | None:
        return f"patch the GPU Operator's ClusterPolicy {names.POLICY_NAME}"


@dataclass(frozen=True)
class Restart:
    """``kubectl -n gpu-operator rollout restart daemonset/NAME``."""

    daemonset: str

    def run(self, ctx: StepContext) -> None:
        _guard(ctx, self)
        gpustack.restart_daemonset(ctx.client, self.daemonset)

    def describe(self) -> str:
        return f"rollout restart daemonset/{self.daemonset} in gpu-operator"

    def cluster_change(self) -> str | None:
        return f"{self.describe()} (restarts an NVIDIA operand on every GPU node)"


@dataclass(frozen=True)
class Delete:
    path: str

    def run(self, ctx: StepContext) -> None:
        _guard(ctx, self)
        kubeapply.delete(ctx.client, self.path)

    def describe(self) -> str:
        return f"delete {self.path}"

    def cluster_change(self) -> str | None:
        return path_change(self.path)


@dataclass(frozen=True)
class Wait:
    rule: Rule
    timeout: float = 30.0
    what: str = field(default="", compare=False)
    # ``notOnKind``: the outcome waited for is one only our pod agent produces (docs/kind.md, "What a kind kubelet
    # cannot do"), so on a kind cluster the step is skipped instead of timing out.
    not_on_kind: bool = False
    # ``onlyOnKind``: what kind produces in that step's place (the lab's start state there), waited for on kind only.
    only_on_kind: bool = False

    def run(self, ctx: StepContext) -> None:
        if self.not_on_kind or self.only_on_kind:  # only then ask the cluster what it is
            on_kind = kind_backend.runs_on_kind(ctx.client)
            if on_kind if self.not_on_kind else not on_kind:
                return
        ev = evidence.Evidence({}, (), ctx.fleet, LiveView(ctx.client))
        deadline = time.monotonic() + self.timeout
        while True:
            outcome = self.rule.evaluate(ev)
            if outcome.passed:
                return
            if time.monotonic() >= deadline:
                raise errors.ClusterError(f"timed out after {self.timeout:.0f} s waiting for {self.what}: "
                                          f"{outcome.message}", hint="gpulab gpu-operator status")
            time.sleep(0.3)

    def describe(self) -> str:
        return f"wait for {self.what}"

    def cluster_change(self) -> str | None:
        return None


_WAITABLE: dict[str, Callable[[Problems, str, dict[str, Any], object], Rule]] = {
    "pod": live.PodRule.parse, "node": live.NodeRule.parse, "quota": live.QuotaRule.parse,
    "claim": live.ClaimRule.parse, "object": live.ObjectRule.parse}


def parse(p: Problems, where: str, raw: Any, lab_dir: Path) -> Step | None:
    """One step from its one-key mapping; problems are recorded, None returned for a broken step."""
    if not isinstance(raw, dict) or len(raw) != 1:
        p.add(where, "a step is a mapping with one key: apply, operator, label, fault, policy, restart, delete or wait")
        return None
    (action, value), = raw.items()
    where = f"{where}.{action}"
    if action == "apply":
        m = value if isinstance(value, dict) else {"file": value}
        p.unknown(where, m, ("file", "refused"))
        file = common.text(p, f"{where}.file" if isinstance(value, dict) else where, m.get("file"))
        hidden = file.split("/", 1)[0] == solutions.SOLUTION and solutions.withheld(lab_dir)
        if file and not hidden and not (lab_dir / file).is_file():
            p.add(where, f"{file} does not exist in {lab_dir.name}/")
        refused = common.strings(p, f"{where}.refused", m["refused"]) if "refused" in m else ()
        return Apply(file, refused, lab_dir)
    if action == "operator":
        if value not in OPERATOR_STATES:
            p.add(where, f"must be one of {', '.join(OPERATOR_STATES)}")
        return Operator(value == "installed")
    if action == "label":
        m = common.mapping(p, where, value)
        p.unknown(where, m, ("node", "key", "value"))
        v = m.get("value")
        if v is not None and not isinstance(v, str):
            p.add(f"{where}.value", "must be a string, or null to remove the label")
        return Label(common.text(p, f"{where}.node", m.get("node")), common.text(p, f"{where}.key", m.get("key")),
                     v if isinstance(v, str) else None)
    if action == "fault":
        return _fault(p, where, value)
    if action == "policy":
        return Policy(common.mapping(p, where, value))
    if action == "restart":
        return Restart(common.text(p, where, value))
    if action == "delete":
        path = common.text(p, where, value)
        if path and not path.startswith(("/api/", "/apis/")):
            p.add(where, "must be an API path starting with /api/ or /apis/")
        return Delete(path)
    if action == "wait":
        return _wait(p, where, value)
    p.add(where, "unknown step (apply, operator, label, fault, policy, restart, delete, wait)")
    return None


def _fault(p: Problems, where: str, value: Any) -> Fault:
    m = common.mapping(p, where, value)
    p.unknown(where, m, ("node", "kind", "gpu", "present"))
    kind = common.text(p, f"{where}.kind", m.get("kind"))
    if kind and kind not in gpustack.FAULT_KINDS:
        p.add(f"{where}.kind", f"must be one of {', '.join(gpustack.FAULT_KINDS)}")
    gpu = m.get("gpu")
    if gpu is not None and (isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0):
        p.add(f"{where}.gpu", "must be a GPU index (0, 1, ...)")
        gpu = None
    present = m.get("present", True)
    if not isinstance(present, bool):
        p.add(f"{where}.present", "must be true or false")
    return Fault(common.text(p, f"{where}.node", m.get("node")), kind, gpu, bool(present))


def _wait(p: Problems, where: str, value: Any) -> Wait | None:
    m = common.mapping(p, where, value)
    timeout = m.get("timeout", 30)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600:
        p.add(f"{where}.timeout", "must be a number of seconds between 0 and 600")
        timeout = 30
    not_on_kind, only_on_kind = m.get("notOnKind", False), m.get("onlyOnKind", False)
    for key, value in (("notOnKind", not_on_kind), ("onlyOnKind", only_on_kind)):
        if not isinstance(value, bool):
            p.add(f"{where}.{key}", "must be true or false")
    if not_on_kind is True and only_on_kind is True:
        p.add(where, "notOnKind and onlyOnKind exclude each other")
    kinds = [k for k in m if k not in ("timeout", "notOnKind", "onlyOnKind")]
    if len(kinds) != 1 or kinds[0] not in _WAITABLE:
        p.add(where, f"needs exactly one of {', '.join(_WAITABLE)} (and optionally timeout, notOnKind, onlyOnKind)")
        return None
    body = common.mapping(p, f"{where}.{kinds[0]}", m[kinds[0]])
    rule = _WAITABLE[kinds[0]](p, f"{where}.{kinds[0]}", body, None)
    return Wait(rule, float(timeout), f"{kinds[0]} {body.get('name', '')}".strip(), not_on_kind is True,
                only_on_kind is True)
