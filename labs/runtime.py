"""A started lab: the learner's working folder plus the cluster, with check, solve, reset and submit.

``start`` puts the lab's scope back to its start values, runs the setup steps and copies the starter files
into the working folder (without overwriting the learner's edits unless asked). A lab already in progress on the
cluster (``labs.resume``: set up there last and not stopped since, as after the idle culler stopped the cluster)
is resumed instead: nothing on the cluster changes and only missing starter files are copied; ``reset`` (or
``start(..., fresh=True)``) starts over. Every method is safe to call again. The learner's files are backed up
before ``solve`` or ``reset`` overwrite them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cluster import backends, errors, inside, poll, settings
from cluster.backends import guard, kind as kind_backend
from cluster.kube.client import Client
from graders import Check, ClusterView, LiveView, Report, Severity, snapshot, source, write_bundle
from labs import catalog, evidence, grading, kubeapply, predict, replay, resume, scope, steps
from labs.classroom import solutions
from labs.checks.live import PredictionRule
from labs.spec import CheckSpec, LabSpec, Task

log = logging.getLogger(__name__)
BACKUPS = ".gpulab-backup"


def default_workdir(lab_id: str) -> Path:
    return (settings.current().labs_dir or Path.cwd() / "gpulab-labs") / lab_id


def _record_path(lab_id: str) -> Path:
    return settings.state_root() / "labs" / f"{lab_id}.json"


class Lab:
    """One lab on one cluster, with the learner's files in ``workdir``."""

    def __init__(self, spec: LabSpec, workdir: Path, kubeconfig: Path | None = None) -> None:
        self.spec = spec
        self.workdir = workdir
        self._kubeconfig = kubeconfig
        self.resumed = False  # the last ``setup`` found the lab in progress and left the cluster as it was

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def tasks(self) -> tuple[Task, ...]:
        return self.spec.tasks

    def file(self, name: str) -> Path:
        """The learner's copy of one of the lab's files."""
        if name not in self.spec.files:
            raise errors.ConfigError("file", [f"{name!r} is not a file of lab {self.id} ({', '.join(self.spec.files)})"])
        return self.workdir / name

    def client(self) -> Client:
        if self._kubeconfig is None:
            from labs.classroom import ondemand

            ondemand.ensure()  # class mode: the learner's own cluster starts on first use
        return Client.from_kubeconfig(self._kubeconfig or backends.current().kubeconfig())

    def _refuse_on_attach(self, what: str, changes: list[str]) -> guard.Owner:
        """Check who owns the cluster before anything changes: an attached one (someone else's) is refused
        with every cluster-wide change the step would make, and nothing is touched."""
        owner = guard.owner(self._kubeconfig)
        if changes:
            shown = "; ".join(dict.fromkeys(changes))
            guard.refuse_if_attach(owner, f"{what} lab {self.id}, which would {shown}")
        return owner

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def setup(self, *, fresh: bool = False) -> None:
        """Scope to start values, setup steps, starter files (``fresh`` replaces the learner's copies).

        A lab in progress on this cluster (``labs.resume``) is resumed unless ``fresh``: the cluster keeps the
        learner's objects, and only starter files the folder lacks are copied."""
        owner = self._refuse_on_attach("set up", [*scope.cluster_changes(self.spec.scope),
                                                  *_changes(self.spec.setup)])
        ours = owner.name != guard.ATTACH  # no record is written on someone else's cluster
        with self.client() as client:
            self.resumed = ours and not fresh and resume.in_progress(client, self.spec)
            if not self.resumed:
                if ours:
                    resume.forget(client)
                scope.normalize(client, self.spec.scope)
                self._run(client, self.spec.setup, "set up", owner)
                if ours:
                    resume.mark(client, self.spec)
        self._copy_files("starter", overwrite=fresh)
        _record_path(self.id).parent.mkdir(parents=True, exist_ok=True)
        _record_path(self.id).write_text(json.dumps({"workdir": str(self.workdir.resolve())}))
        if self.resumed:  # a warning, so that a notebook shows it without any logging set up
            log.warning("lab %s is resumed: your objects on the cluster and your files are as you left them; "
                        "to start over, reset it (lab.reset() in a notebook, `gpulab lab reset %s` in a terminal)",
                        self.id, self.id)

    def solve(self) -> None:
        """Write the solution files into the working folder and do what a learner would do with them (refused
        for a learner in class mode: the solutions are the instructor's)."""
        solutions.require(self.spec.directory, "lab.solve()")
        owner = self._refuse_on_attach("solve", _changes(self.spec.solve))
        self._copy_files("solution", overwrite=True)
        with self.client() as client:
            predict.stamp_file(client, self.workdir, PredictionRule.stamps_of(self.spec.checks))  # before any reveal
            self._run(client, self.spec.solve, "solve", owner)

    def reset(self) -> None:
        """Back to the start: the scope and setup again, and the starter files (the old ones are backed up).

        An evidence bundle written before is moved to the backup too: it no longer describes the lab."""
        self._refuse_on_attach("reset", [*scope.cluster_changes(self.spec.scope), *_changes(self.spec.setup)])
        stale = self.workdir / grading.BUNDLE_FILE
        if stale.is_file():
            backup = self.workdir / BACKUPS / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
            backup.mkdir(parents=True, exist_ok=True)
            stale.replace(backup / stale.name)
        self.setup(fresh=True)

    def stop(self) -> None:
        """Leave the lab: delete its namespaces and objects and turn the GPU knobs back (your files stay).

        No lab is in progress afterwards, whichever one was: leaving may change another lab's scope too."""
        owner = self._refuse_on_attach("stop", scope.cluster_changes(self.spec.scope, leaving=True))
        with self.client() as client:
            if owner.name != guard.ATTACH:
                resume.forget(client)
            scope.leave(client, self.spec.scope)

    def apply(self, *names: str) -> list[kubeapply.Applied]:
        """Apply the learner's files (all linted manifests when none are named); refusals are results."""
        read: list[tuple[str, kubeapply.Applied | list[Any]]] = []
        for name in names or self.spec.lint_files:
            self.file(name)  # a file of the lab, or a clear error
            try:
                data = inside.read(self.workdir, name, evidence.MAX_FILE_BYTES + 1)
            except inside.NotInside as exc:
                read.append((name, kubeapply.Applied(name, False, f"{exc.strerror}: not read")))
                continue
            if data is None:
                read.append((name, kubeapply.Applied(name, False, "the file does not exist")))
                continue
            parsed = source.parse_bytes(data, name)
            bad = [f for f in parsed.findings if f.severity is Severity.ERROR]
            if bad:
                read.append((name, kubeapply.Applied(name, False, f"line {bad[0].line}: {bad[0].message}")))
                continue
            read.append((name, [d.data for d in parsed.documents]))
        owner = guard.owner(self._kubeconfig)
        for name, docs in read:  # a learner's ConfigMap in gpu-operator would change the real GPU stack there
            changes = [c for c in map(steps.object_change, docs if isinstance(docs, list) else []) if c]
            if changes:
                guard.refuse_if_attach(owner, f"apply {name}, which would {'; '.join(changes)}")
        out: list[kubeapply.Applied] = []
        with self.client() as client:
            for _, docs in read:
                out.extend(kubeapply.apply_all(client, docs) if isinstance(docs, list) else [docs])
        return out

    def predict(self, key: str, value: object) -> predict.Prediction:
        """Record your prediction ``key`` before you look; a ``prediction`` check compares it with the cluster.

        Refused once the object that reveals the answer exists (reset the lab to predict again)."""
        rules = {c.rule.key: c.rule for c in self.spec.checks if isinstance(c.rule, PredictionRule)}
        if not rules:
            raise predict.PredictionError(f"lab {self.id} asks for no predictions")
        rule = rules.get(key)
        if rule is not None and rule.before is not None:
            kind, namespace, name = rule.before
            with self.client() as client:
                shown = PredictionRule.lookup(LiveView(client), rule.before)
            if shown is not None:
                where = f"{namespace}/" if namespace else ""
                raise predict.PredictionError(
                    f"too late for {key!r}: {kind} {where}{name} already exists, so the cluster shows the answer",
                    hint=f"reset the lab (lab.reset() or `gpulab lab reset {self.id}`) to predict again")
        with self.client() as client:  # stamped in the cluster, dated by the API server (labs.predict.stamp)
            return predict.record(self.workdir, key, value, keys=tuple(sorted(rules)),
                                  stamp_in=(client, rule.namespace if rule else ""))

    # --- grading -----------------------------------------------------------------------------------------------

    def _evidence(self, cluster: ClusterView | None) -> evidence.Evidence:
        files = evidence.read_files(self.workdir, self.spec.files)
        return evidence.Evidence(files, self.spec.linted, evidence.fleet_facts(self.spec.fleet), cluster)

    def check(self, *, wait: float = 5.0) -> Report:
        """Grade the working folder against the live cluster; cluster checks are retried for up to ``wait`` s."""
        with self.client() as client:
            # On kind, a check only the pod agent can satisfy is graded on what kind produces (docs/kind.md).
            kind = self._on_kind(client)
            ev = self._evidence(LiveView(client))
            by_id = {c.id: c for c in self.spec.checks}
            first = Report.from_checks(self.id, [self._on_kind_check(ev, c, kind) for c in
                                                 grading.run_checks(self.spec, ev, strict=False).checks])

            def failing(report: Report) -> list[Check]:
                return [c for c in report.checks if not c.passed and by_id[c.id].cluster]

            def again(report: Report) -> Report:
                ev.view = LiveView(client)
                redone = {c.id: self._on_kind_check(ev, grading.evaluate(self.id, by_id[c.id], ev, strict=False), kind)
                          for c in failing(report)}
                return Report.from_checks(self.id, [redone.get(c.id, c) for c in report.checks])

            report = poll.until(first, again, lambda r: r.passed or not failing(r), wait=wait, interval=0.5)
        if wait > 0:
            report = Report.from_checks(self.id, [self._timed_out(c, wait, by_id[c.id].cluster)
                                                  for c in report.checks])
        return report

    def _on_kind(self, client: Client) -> dict[str, tuple[str, CheckSpec]]:
        """On a kind cluster: check id -> (why kind differs, the check of what kind produces), from the lab's
        ``spec.backends.kind`` and the backend's reasons (``kind.lacks``); else nothing."""
        differences = self.spec.backends.get("kind", {})
        if not differences or not kind_backend.runs_on_kind(client):
            return {}
        by_id = {c.id: c for c in self.spec.checks}
        return {check_id: (kind_backend.lacks(d.lacks, d.then), dataclasses.replace(by_id[check_id], rule=d.rule))
                for check_id, d in differences.items()}

    def _on_kind_check(self, ev: evidence.Evidence, c: Check, kind: dict[str, tuple[str, CheckSpec]]) -> Check:
        """A check kind cannot produce, failing as written, graded on what kind does produce, with the reason
        (docs/kind.md, "What a kind kubelet cannot do")."""
        if c.id not in kind or (c.passed and not self.spec.backends["kind"][c.id].only):
            return c
        reason, spec = kind[c.id]
        got = grading.evaluate(self.id, spec, ev, strict=False)
        return Check(c.id, got.passed, c.points, f"{reason}. Graded on what kind produces: {got.message}",
                     "" if got.passed else spec.hint)

    @staticmethod
    def _timed_out(c: Check, wait: float, cluster: bool) -> Check:
        if c.passed or not cluster:
            return c
        return Check(c.id, False, c.points, f"timed out after {wait:.0f} s waiting: {c.message}", c.hint)

    def submit(self, path: Path | None = None) -> Path:
        """Write the evidence bundle (``graders`` format): the learner's files and the cluster state of the
        lab's namespaces and GPU nodes, so that ``gpulab grade`` and nbgrader can grade offline."""
        files = {n: t.decode("utf-8", "replace") for n, t in evidence.read_files(self.workdir, self.spec.files).items()}
        with self.client() as client:
            data = snapshot(client, self.spec.scope.namespaces, files, self.id,
                            replay.record_actions(client, self.spec))
        return write_bundle(path or self.workdir / grading.BUNDLE_FILE, data)

    def snapshot(self) -> dict[str, Any]:
        """The objects this lab may change, as comparable data (what ``reset`` must restore)."""
        with self.client() as client:
            return scope.snapshot(client, self.spec.scope)

    def progress(self, report: Report) -> dict[str, tuple[float, float]]:
        """Task id -> (points earned, points possible) in ``report``."""
        got = {c.id: c for c in report.checks}
        out = {}
        for task in self.tasks:
            graded = [got[c.id] for c in task.checks if c.id in got]
            out[task.id] = (sum(c.points for c in graded if c.passed), sum(c.points for c in graded))
        return out

    def widget(self) -> Any:
        """The notebook widget for this lab (needs ipywidgets, from the course extra)."""
        from labs import widget

        return widget.LabWidget(self)

    # --- helpers -----------------------------------------------------------------------------------------------

    def _run(self, client: Client, todo: tuple[steps.Step, ...], what: str, owner: guard.Owner) -> None:
        ctx = steps.StepContext(client, self.spec.directory, evidence.fleet_facts(self.spec.fleet), owner)
        for step in todo:
            log.info("lab %s: %s: %s", self.id, what, step.describe())
            try:
                step.run(ctx)
            except errors.ApiError as exc:
                raise errors.ClusterError(f"lab {self.id} could not {what}: {step.describe()}: {exc.api_message}",
                                          hint=f"gpulab status; then gpulab lab reset {self.id}") from exc

    def _copy_files(self, folder: str, *, overwrite: bool) -> None:
        """The lab's ``folder`` files into the learner's folder. The folder is the learner's and may hold links:
        a file is never written or read through one (``cluster.inside``), and a learner's own version that
        would be replaced (a link included, as a link) is moved to the backups first."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        for name in self.spec.files:
            wanted = (self.spec.directory / folder / name).read_bytes()
            try:
                if os.path.lexists(self.workdir / name):
                    if not overwrite:
                        continue
                    starter = self.spec.starter(name).read_bytes()
                    try:
                        have = inside.read(self.workdir, name, max(len(wanted), len(starter)) + 1)
                    except inside.NotInside:
                        have = None  # a link: kept in the backups as it is, its target never read
                    if have == wanted:
                        continue
                    if have != starter:
                        inside.move(self.workdir, name, Path(BACKUPS) / stamp / name)
                inside.write(self.workdir, name, wanted)
            except inside.NotInside as exc:
                raise errors.ConfigError(str(self.workdir / name), [
                    f"{exc.strerror}: gpulab writes a lab's files only inside its folder, never through a link"],
                    hint=f"replace the link in {self.workdir} with a real folder, or start the lab in a new one "
                         "(--dir)") from None


def _changes(todo: tuple[steps.Step, ...]) -> list[str]:
    return [c for c in (step.cluster_change() for step in todo) if c]


def start(lab_id: str, *, workdir: Path | str | None = None, kubeconfig: Path | str | None = None,
          fresh: bool = False) -> Lab:
    """Set up lab ``lab_id`` on the cluster and return it (its files in ``workdir``, default ./gpulab-labs/<id>).

    A lab in progress on the cluster is resumed (``Lab.resumed``); ``fresh=True`` sets it up afresh and replaces
    the learner's files with the starter files (backed up first)."""
    spec = catalog.get(lab_id)
    lab = Lab(spec, Path(workdir) if workdir else default_workdir(lab_id), Path(kubeconfig) if kubeconfig else None)
    lab.setup(fresh=fresh)
    return lab


def attach(lab_id: str, *, kubeconfig: Path | str | None = None) -> Lab:
    """The lab started earlier (by ``start`` or ``gpulab lab start``), without setting it up again."""
    spec = catalog.get(lab_id)
    try:
        workdir = Path(json.loads(_record_path(lab_id).read_text())["workdir"])
    except (OSError, ValueError, KeyError) as exc:
        raise errors.ConfigError("lab", [f"lab {lab_id} has not been started on this cluster"],
                                 hint=f"gpulab lab start {lab_id}") from exc
    return Lab(spec, workdir, Path(kubeconfig) if kubeconfig else None)
