"""Checks on the learner's files alone: static rules (``lint``), objects in a manifest (``manifest``) and
answers in the worksheet (``answer``). They need no cluster, so offline grading runs them as they are.

Messages say what was found and where; the lab's own hint (kept in ``lab.yaml``) says what to study. Answer
checks never print the expected answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders import Finding, Severity, source
from labs import evidence, paths
from labs.checks import common
from labs.spec import Outcome, Problems

ANSWERS = "answers.yaml"


@dataclass(frozen=True)
class LoadContext:
    """What check parsers validate against: the learner's files, the linted files, the static rule ids."""

    files: tuple[str, ...]
    lint_files: tuple[str, ...]
    rule_ids: frozenset[str]
    directory: Path | None = None  # the lab's folder, for checks that read a file of its own (setup/...)
    namespaces: tuple[str, ...] = ()  # the lab's own (spec.scope.namespaces): prediction stamps live in the first


def _file(p: Problems, where: str, value: Any, ctx: LoadContext) -> str:
    name = common.text(p, where, value)
    if name and name not in ctx.files:
        p.add(where, f"{name!r} is not one of the lab's files ({', '.join(ctx.files)})")
    return name


def _unreadable(parsed: source.SourceFile) -> Finding | None:
    return next((f for f in parsed.findings if f.severity is Severity.ERROR and f.rule.startswith(
        ("yaml-", "input-"))), None)


@dataclass(frozen=True)
class LintRule:
    """No finding (of ``rules``, at ``severity`` or worse) from the static rules in ``files``."""

    files: tuple[str, ...]
    rules: frozenset[str]
    severity: Severity
    cluster = False

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], ctx: LoadContext) -> LintRule:
        p.unknown(where, raw, ("files", "rules", "severity"))
        files = common.strings(p, f"{where}.files", raw.get("files"))
        for i, name in enumerate(files):
            if name not in ctx.lint_files:
                p.add(f"{where}.files[{i}]", f"{name!r} is not in the lab's lintFiles")
        rules = common.strings(p, f"{where}.rules", raw["rules"]) if "rules" in raw else ()
        for i, rule in enumerate(rules):
            if rule not in ctx.rule_ids:
                p.add(f"{where}.rules[{i}]", f"unknown static rule {rule!r} (see `gpulab lint --list-rules`)")
        severity = raw.get("severity", "error")
        if severity not in ("error", "warning"):
            p.add(f"{where}.severity", "must be error or warning")
            severity = "error"
        return cls(files, frozenset(rules), Severity(severity))

    @property
    def lint_inputs(self) -> tuple[str, ...]:
        return self.files

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        missing = [n for n in self.files if n not in ev.files]
        if missing:
            return Outcome(False, f"{', '.join(missing)} is missing from the submission")
        hits = [f for f in ev.lint.findings
                if f.file in self.files and f.severity.rank <= self.severity.rank
                and (not self.rules or f.rule in self.rules or f.rule.startswith(("yaml-", "input-")))]
        if not hits:
            return Outcome(True, f"{', '.join(self.files)}: no problems found")
        first = hits[0]
        more = f" (and {len(hits) - 1} more: run `gpulab lint {' '.join(self.files)}`)" if len(hits) > 1 else ""
        return Outcome(False, f"{first.file}:{first.line} [{first.rule}] {first.message}{more}")


@dataclass(frozen=True)
class ManifestRule:
    """An object (or a plain document) in a learner's file satisfies every expectation."""

    file: str
    kind: str
    name: str
    document: int | None
    expect: tuple[paths.Expect, ...]
    reveal: bool = True
    cluster = False

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], ctx: LoadContext) -> ManifestRule:
        p.unknown(where, raw, ("file", "kind", "name", "document", "expect"))
        file = _file(p, f"{where}.file", raw.get("file"), ctx)
        kind = common.text(p, f"{where}.kind", raw.get("kind"), required=False)
        name = common.text(p, f"{where}.name", raw.get("name"), required=False)
        document = raw.get("document")
        if document is not None and (isinstance(document, bool) or not isinstance(document, int) or document < 0):
            p.add(f"{where}.document", "must be a document index (0, 1, ...)")
            document = None
        if not kind and document is None:
            p.add(where, "select the object with kind (and name) or with document")
        return cls(file, kind, name, document, common.expectations(p, f"{where}.expect", raw.get("expect")))

    def _label(self) -> str:
        if self.kind:
            return f"{self.kind} {self.name}".strip() if self.name else self.kind
        return f"document {self.document}"

    def _find(self, parsed: source.SourceFile) -> object | None:
        docs = parsed.documents
        if self.document is not None:
            return docs[self.document].data if self.document < len(docs) else None
        for doc in docs:
            data = doc.data
            if isinstance(data, dict) and data.get("kind") == self.kind and (
                    not self.name or isinstance(data.get("metadata"), dict) and data["metadata"].get("name") == self.name):
                return data
        return None

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        parsed = ev.parsed(self.file)
        if parsed is None:
            return Outcome(False, f"{self.file} is missing from the submission")
        bad = _unreadable(parsed)
        if bad is not None:
            return Outcome(False, f"{self.file}:{bad.line} cannot be read: {bad.message}")
        data = self._find(parsed)
        if data is None:
            return Outcome(False, f"{self.file} has no {self._label()}")
        for exp in self.expect:
            ok, found = exp.test(data)
            if not ok:
                said = f"{exp.describe()}, but it is {found}" if self.reveal else \
                    f"{exp.path} is {found}, which is not right"
                return Outcome(False, f"{self.file}, {self._label()}: {said}")
        return Outcome(True, f"{self.file}, {self._label()}: as expected")


@dataclass(frozen=True)
class AnswerRule:
    """A worksheet answer (``answers.yaml`` by default) passes its expectation; the answer stays secret."""

    file: str
    expect: paths.Expect
    cluster = False

    @classmethod
    def parse(cls, p: Problems, where: str, raw: dict[str, Any], ctx: LoadContext) -> AnswerRule:
        file = _file(p, f"{where}.file", raw.get("file", ANSWERS), ctx)
        exp = common.expectation(p, where, {k: v for k, v in raw.items() if k != "file"}, path_key="key")
        if exp is None:
            return cls(file, paths.Expect(paths.parse("missing"), "exists", True))
        return cls(file, exp)

    def evaluate(self, ev: evidence.Evidence) -> Outcome:
        parsed = ev.parsed(self.file)
        if parsed is None:
            return Outcome(False, f"{self.file} is missing from the submission")
        bad = _unreadable(parsed)
        if bad is not None:
            return Outcome(False, f"{self.file}:{bad.line} cannot be read: {bad.message}")
        data = parsed.documents[0].data if parsed.documents else None
        found = paths.walk(self.expect.path, data)
        if not found or all(v is None or (isinstance(v, str) and not v.strip()) for v in found):
            return Outcome(False, f"{self.file}: `{self.expect.path}` is not answered yet")
        ok, _ = self.expect.test(data)
        shown = paths.scalar(found[0])
        given = repr(shown) if shown is not None else "your answer"
        if ok:
            return Outcome(True, f"{self.file}: `{self.expect.path}` is right")
        return Outcome(False, f"{self.file}: `{self.expect.path}` = {given} is not right")
