"""Reading ``labs/<id>/lab.yaml`` strictly: versioned, unknown fields rejected, every problem reported at once.

The result is a ``LabSpec`` whose setup and solve steps and checks are ready-to-run objects. A lab that does
not load raises ``ConfigError`` listing each problem with its path (``spec.tasks[2].checks[0].lint.rules[1]:
unknown static rule ...``); a learner never sees this, an author does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from cluster import errors, strict
from cluster import fleet as fleet_mod
from graders import findings
from graders.rules import RULES
from labs import checks, steps
from labs.checks import common, static
from labs.classroom import solutions
from cluster.backends import kind as kind_backend
from labs.spec import (API_VERSION, KIND, OPERATOR_STATES, BackendDifference, CheckSpec, LabSpec, ObjectRef, Problems,
                       Scope, Task)

ID_PATTERN = re.compile(r"^[0-9]{2}[a-z]?-[a-z0-9]+(-[a-z0-9]+)*$")
# The course modules a lab belongs to: one per course section, plus the capstone, which combines them (it has
# no static rules or quiz bank of its own, so it is not a section).
CAPSTONE = "capstone"
MODULES: tuple[str, ...] = (*findings.SECTIONS, CAPSTONE)
_CHECK_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_TOP = ("apiVersion", "kind", "metadata", "spec")
_SPEC = ("title", "module", "summary", "fleet", "files", "lintFiles", "scope", "setup", "solve", "tasks", "backends")
_DIFFERENCE = ("lacks", "then", "gradedOn", "only")
_SCOPE = ("operator", "baseline", "namespaces", "objects", "nodeLabels", "faults", "policy")
_TASK = ("id", "title", "instructions", "files", "checks")
_CHECK = ("id", "title", "points", "hint")


def version_problem(api_version: object, what: str = "lab") -> str | None:
    """Too old / too new / not ours, in words; None when it is the version we read."""
    if api_version == API_VERSION:
        return None
    text = str(api_version)
    m = re.fullmatch(r"gpulab\.dev/v([0-9]+)((alpha|beta)[0-9]+)?", text)
    if m and (int(m.group(1)) > 1 or (int(m.group(1)) == 1 and not m.group(2))):
        return f"{text} is newer than this gpulab understands ({API_VERSION}); upgrade gpulab to read this {what}"
    if m:
        return f"{text} is an older {what} format this gpulab no longer reads; convert it to {API_VERSION}"
    return f"must be {API_VERSION}, got {text!r}"


def load(directory: Path) -> LabSpec:
    """Load and validate one lab folder (its ``lab.yaml``, ``starter/`` and ``solution/``)."""
    source = directory / "lab.yaml"
    try:
        text = source.read_text(encoding="utf-8")
        raw = YAML(typ="safe", pure=True).load(text)
    except (OSError, UnicodeDecodeError, YAMLError) as exc:
        raise errors.ConfigError(str(source), [f"cannot be read: {exc}"]) from exc
    p = Problems(lines=lambda: strict.load_yaml(text))  # read again for lines only when a problem needs one
    spec = _lab(p, raw, directory)
    if p or spec is None:
        raise errors.ConfigError(str(source), p.items or ["the file holds no lab"],
                                 hint="fix the lab spec; `gpulab lab list` shows which labs load")
    return spec


def _lab(p: Problems, raw: Any, directory: Path) -> LabSpec | None:
    doc = common.mapping(p, "(top)", raw)
    if not doc:
        return None
    p.unknown("(top)", doc, _TOP)
    problem = version_problem(doc.get("apiVersion"))
    if problem:
        p.add("apiVersion", problem)
    if doc.get("kind") != KIND:
        p.add("kind", f"must be {KIND}, got {doc.get('kind')!r}")
    meta = common.mapping(p, "metadata", doc.get("metadata"))
    p.unknown("metadata", meta, ("id", "version"))
    lab_id = common.text(p, "metadata.id", meta.get("id"))
    if lab_id and not ID_PATTERN.match(lab_id):
        p.add("metadata.id", "must look like 03-scheduling (two digits, optional letter, words with dashes)")
    if lab_id and lab_id != directory.name:
        p.add("metadata.id", f"must match the folder name {directory.name!r}")
    version = meta.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        p.add("metadata.version", "must be a whole number >= 1")
        version = 1
    spec = common.mapping(p, "spec", doc.get("spec"))
    p.unknown("spec", spec, _SPEC)
    return _spec(p, spec, lab_id, int(version), directory)


def _spec(p: Problems, spec: dict[str, Any], lab_id: str, version: int, directory: Path) -> LabSpec:
    module = spec.get("module")
    if module not in MODULES:
        p.add("spec.module", f"must be one of the course modules {', '.join(MODULES)}")
    fleet = spec.get("fleet", "starter")
    if fleet not in fleet_mod.builtin_names():
        p.add("spec.fleet", f"must be a built-in fleet ({', '.join(fleet_mod.builtin_names())})")
    files = common.strings(p, "spec.files", spec.get("files"))
    # A learner's account in class mode has no solution/ to read (labs.classroom.solutions): the lab still loads.
    folders = ("starter",) if solutions.withheld(directory) else ("starter", "solution")
    for i, name in enumerate(files):
        for folder in folders:
            if not (directory / folder / name).is_file():
                p.add(f"spec.files[{i}]", f"{folder}/{name} does not exist")
    lint_files = common.strings(p, "spec.lintFiles", spec["lintFiles"]) if "lintFiles" in spec else ()
    for i, name in enumerate(lint_files):
        if name not in files:
            p.add(f"spec.lintFiles[{i}]", f"{name!r} is not one of spec.files")
    scope = _scope(p, common.mapping(p, "spec.scope", spec.get("scope", {})))
    ctx = static.LoadContext(files, lint_files, frozenset(r.id for r in RULES), directory, scope.namespaces)
    tasks = _tasks(p, spec.get("tasks"), ctx)
    backends = _backends(p, common.mapping(p, "spec.backends", spec.get("backends", {})), tasks, ctx)
    return LabSpec(
        id=lab_id, version=version, title=common.text(p, "spec.title", spec.get("title")), module=str(module),
        summary=common.text(p, "spec.summary", spec.get("summary")), fleet=str(fleet), scope=scope,
        setup=_steps(p, "spec.setup", spec.get("setup", []), directory),
        solve=_steps(p, "spec.solve", spec.get("solve", []), directory),
        tasks=tasks, files=files, lint_files=lint_files, directory=directory, backends=backends,
    )


def _backends(p: Problems, raw: dict[str, Any], tasks: tuple[Task, ...],
              ctx: static.LoadContext) -> dict[str, dict[str, BackendDifference]]:
    """``spec.backends.kind.<check id>``: a check kind cannot produce as written, what kind lacks for it (one of
    ``cluster.backends.kind.LACKS``), the lab's words for what kind does instead, and the cluster check graded in
    its place. Only kind has such differences (local plays the kubelet; attach runs no lab stack of its own)."""
    p.unknown("spec.backends", raw, ("kind",))
    known = {c.id: c for t in tasks for c in t.checks}
    out: dict[str, dict[str, BackendDifference]] = {}
    for backend, entries in raw.items():
        if backend != "kind":
            continue
        where = f"spec.backends.{backend}"
        for check_id, item in common.mapping(p, where, entries).items():
            at = f"{where}.{check_id}"
            if check_id not in known:
                p.add(at, f"{check_id!r} is not a check of this lab")
            d = common.mapping(p, at, item)
            p.unknown(at, d, _DIFFERENCE)
            lacks = common.text(p, f"{at}.lacks", d.get("lacks"))
            then = common.text(p, f"{at}.then", d.get("then"), required=False)
            if lacks and lacks not in kind_backend.LACKS:
                near = strict.closest(lacks, kind_backend.LACKS)
                p.add(f"{at}.lacks", f"{lacks!r} is not something kind lacks (did you mean {near!r}?)" if near else
                      f"must be one of {', '.join(kind_backend.LACKS)}")
            elif lacks and kind_backend.needs_then(lacks) != bool(then):
                p.add(f"{at}.then", "is needed: the reason says what happens instead" if not then else
                      "is not used by this reason")
            only = d.get("only", False)
            if not isinstance(only, bool):
                p.add(f"{at}.only", "must be true or false")
            graded = common.mapping(p, f"{at}.gradedOn", d.get("gradedOn"))
            if len(graded) != 1 or next(iter(graded)) not in checks.KINDS:
                p.add(f"{at}.gradedOn", f"needs exactly one check kind: {', '.join(checks.KINDS)}")
                continue
            (kind, body), = graded.items()
            rule = checks.KINDS[kind](p, f"{at}.gradedOn.{kind}", common.mapping(p, f"{at}.gradedOn.{kind}", body),
                                      ctx)
            if not rule.cluster:
                p.add(f"{at}.gradedOn", "must be a check of the cluster (what the backend produces instead)")
            out.setdefault(backend, {})[check_id] = BackendDifference(check_id, lacks, then, rule, bool(only))
    return out


def _steps(p: Problems, where: str, raw: Any, directory: Path) -> tuple[steps.Step, ...]:
    if not isinstance(raw, list):
        p.add(where, "must be a list of steps")
        return ()
    parsed = [steps.parse(p, f"{where}[{i}]", item, directory) for i, item in enumerate(raw)]
    return tuple(s for s in parsed if s is not None)


def _scope(p: Problems, raw: dict[str, Any]) -> Scope:
    p.unknown("spec.scope", raw, _SCOPE)
    op = raw.get("operator", "")
    if op and op not in OPERATOR_STATES:
        p.add("spec.scope.operator", f"must be one of {', '.join(OPERATOR_STATES)}")
    objects = []
    for i, item in enumerate(raw.get("objects", []) if isinstance(raw.get("objects", []), list) else []):
        where = f"spec.scope.objects[{i}]"
        m = common.mapping(p, where, item)
        p.unknown(where, m, ("apiVersion", "kind", "name", "namespace"))
        objects.append(ObjectRef(common.text(p, f"{where}.apiVersion", m.get("apiVersion")),
                                 common.text(p, f"{where}.kind", m.get("kind")),
                                 common.text(p, f"{where}.name", m.get("name")),
                                 common.text(p, f"{where}.namespace", m.get("namespace"), required=False)))
    labels = common.mapping(p, "spec.scope.nodeLabels", raw.get("nodeLabels", {}))
    baseline = raw.get("baseline", True)
    if not isinstance(baseline, bool):
        p.add("spec.scope.baseline", "must be true or false")
    return Scope(
        operator=str(op or ""),
        baseline=bool(baseline),
        namespaces=common.strings(p, "spec.scope.namespaces", raw["namespaces"]) if "namespaces" in raw else (),
        objects=tuple(objects),
        node_labels={node: common.strings(p, f"spec.scope.nodeLabels.{node}", keys) for node, keys in labels.items()},
        faults=common.strings(p, "spec.scope.faults", raw["faults"]) if "faults" in raw else (),
        policy=common.strings(p, "spec.scope.policy", raw["policy"]) if "policy" in raw else (),
    )


def _tasks(p: Problems, raw: Any, ctx: static.LoadContext) -> tuple[Task, ...]:
    if not isinstance(raw, list) or not raw:
        p.add("spec.tasks", "must be a non-empty list of tasks")
        return ()
    out: list[Task] = []
    seen_tasks: set[str] = set()
    seen_checks: set[str] = set()
    for i, item in enumerate(raw):
        where = f"spec.tasks[{i}]"
        t = common.mapping(p, where, item)
        p.unknown(where, t, _TASK)
        task_id = common.text(p, f"{where}.id", t.get("id"))
        if task_id in seen_tasks:
            p.add(f"{where}.id", f"duplicate task id {task_id!r}")
        seen_tasks.add(task_id)
        files = common.strings(p, f"{where}.files", t["files"]) if "files" in t else ()
        for j, name in enumerate(files):
            if name not in ctx.files:
                p.add(f"{where}.files[{j}]", f"{name!r} is not one of spec.files")
        raw_checks = t.get("checks")
        if not isinstance(raw_checks, list) or not raw_checks:
            p.add(f"{where}.checks", "every task needs at least one check")
            raw_checks = []
        parsed = [_check(p, f"{where}.checks[{j}]", c, task_id, ctx, seen_checks) for j, c in enumerate(raw_checks)]
        task_checks = [c for c in parsed if c is not None]
        out.append(Task(task_id, common.text(p, f"{where}.title", t.get("title")),
                        common.text(p, f"{where}.instructions", t.get("instructions")), files, tuple(task_checks)))
    return tuple(out)


def _check(p: Problems, where: str, raw: Any, task: str, ctx: static.LoadContext,
           seen: set[str]) -> CheckSpec | None:
    c = common.mapping(p, where, raw)
    check_id = common.text(p, f"{where}.id", c.get("id"))
    if check_id and not _CHECK_ID.match(check_id):
        p.add(f"{where}.id", "must be lower-case words joined by dashes")
    if check_id in seen:
        p.add(f"{where}.id", f"duplicate check id {check_id!r}")
    seen.add(check_id)
    points = c.get("points", 1)
    if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 < points <= 100:
        p.add(f"{where}.points", "must be a number of points between 0 (excluded) and 100")
        points = 1
    hint = common.text(p, f"{where}.hint", c.get("hint"))
    kinds = [k for k in c if k not in _CHECK]
    if len(kinds) != 1 or kinds[0] not in checks.KINDS:
        p.add(where, f"needs exactly one check kind: {', '.join(checks.KINDS)} (found {', '.join(kinds) or 'none'})")
        return None
    kind = kinds[0]
    rule = checks.KINDS[kind](p, f"{where}.{kind}", common.mapping(p, f"{where}.{kind}", c[kind]), ctx)
    title = common.text(p, f"{where}.title", c.get("title"), required=False)
    return CheckSpec(check_id, task, float(points), hint, rule, title)
