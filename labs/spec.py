"""The value types of a lab: its spec, tasks, checks, setup/solve steps and the scope it may change.

A lab is authored as versioned strict YAML (``labs/<id>/lab.yaml``, read by ``labs.loader``) and lives in
memory as these frozen objects: ``setup``, ``solve`` and every check are Python objects with one method each,
so the runtime, the grader and the tests drive them the same way. Nothing here talks to a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cluster import strict

if TYPE_CHECKING:
    from labs import evidence, steps

API_VERSION = "gpulab.dev/v1"
KIND = "Lab"
OPERATOR_STATES = ("installed", "absent")


Problems = strict.Problems  # the one strict-spec reader (path, line, did-you-mean), shared with fleets and quizzes


@dataclass(frozen=True)
class Outcome:
    """What one check concluded: passed or not, and what it saw, in words."""

    passed: bool
    message: str


class Rule(Protocol):
    """The evaluator behind a check. ``cluster`` rules need a cluster view (live or an evidence bundle)."""

    cluster: bool

    def evaluate(self, ev: evidence.Evidence) -> Outcome: ...


@dataclass(frozen=True)
class CheckSpec:
    id: str
    task: str
    points: float
    hint: str
    rule: Rule
    title: str = ""

    @property
    def cluster(self) -> bool:
        return self.rule.cluster


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    instructions: str
    files: tuple[str, ...]
    checks: tuple[CheckSpec, ...]


@dataclass(frozen=True)
class ObjectRef:
    """A named object a lab owns: deleted on reset, recreated by setup when setup makes it."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@dataclass(frozen=True)
class Scope:
    """Everything a lab may change. Setup first puts these back to their start values, then runs its steps.

    ``operator``: the GPU Operator must be installed / absent ("" = the lab does not care);
    ``namespaces``: lab namespaces, created empty; ``objects``: named objects, deleted;
    ``node_labels``: node -> label keys, removed; ``faults``: nodes whose simulated faults are cleared;
    ``policy``: ClusterPolicy ``spec`` fields (dotted), restored to the operator's defaults;
    ``baseline``: every GPU node back to the stack's defaults first: no simulated faults, no device-plugin
    config or DRA labels, MIG layouts ``all-disabled``, and the ClusterPolicy's ``devicePlugin.config`` and
    ``mig.strategy`` as installed. This is what lets any lab start whatever lab ran before it.
    """

    operator: str = ""
    baseline: bool = True
    namespaces: tuple[str, ...] = ()
    objects: tuple[ObjectRef, ...] = ()
    node_labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    faults: tuple[str, ...] = ()
    policy: tuple[str, ...] = ()


@dataclass(frozen=True)
class BackendDifference:
    """One check of a lab that a backend cannot produce as written (lab.yaml ``spec.backends.<backend>``): the
    capability the backend lacks (its reason is the backend's), the lab's words for what happens instead
    (``then``), and the check graded in its place (``rule``). ``only``: graded on ``rule`` even when the check
    passes as written (its own reading says nothing on that backend)."""

    check: str
    lacks: str
    then: str
    rule: Rule
    only: bool = False


@dataclass(frozen=True)
class LabSpec:
    id: str
    version: int
    title: str
    module: str  # the course section (graders.findings.SECTIONS)
    summary: str
    fleet: str
    scope: Scope
    setup: tuple[steps.Step, ...]
    solve: tuple[steps.Step, ...]
    tasks: tuple[Task, ...]
    files: tuple[str, ...]  # the learner's files (copied from starter/)
    lint_files: tuple[str, ...]  # the learner's manifests (applied by lab.apply, open to the static rules)
    directory: Path
    # backend name -> check id -> how that backend grades the check (lab.yaml ``spec.backends``)
    backends: Mapping[str, Mapping[str, BackendDifference]] = field(default_factory=dict)

    @property
    def checks(self) -> tuple[CheckSpec, ...]:
        return tuple(c for t in self.tasks for c in t.checks)

    @property
    def linted(self) -> tuple[str, ...]:
        """The manifests some ``lint`` check reads: the only ones grading runs the static rules on."""
        wanted = {f for c in self.checks for f in getattr(c.rule, "lint_inputs", ())}
        return tuple(f for f in self.lint_files if f in wanted)

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)

    def starter(self, name: str) -> Path:
        return self.directory / "starter" / name
