"""Run every static rule over files, folders or in-memory texts and gather one sorted ``LintResult``.

The pipeline: read each file safely (``graders.source``), unpack ``kind: List`` items and device-plugin or
mig-parted configs embedded in ConfigMaps (with line numbers mapped into the outer file), index what the
submission defines, compile all CEL selectors in one batch, then run each rule on each document. A rule
that crashes is our bug: it is logged and reported as a finding, and linting goes on.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from cluster import errors
from cluster.gpu import cel as cel_mod
from graders import context, findings, manifests, messages, source
from graders.rules import RULES, base, dra_cel

log = logging.getLogger(__name__)

SUFFIXES = (".yaml", ".yml", ".json")
MAX_FILES = 5_000
_SNIFF = 64 * 1024  # the words that make a ConfigMap value worth parsing are looked for this far


def lint_paths(
    paths: Sequence[str | Path],
    fleet: context.FleetFacts | None = None,
    *,
    compile_cel: bool = True,
    limits: source.Limits = source.DEFAULT_LIMITS,
) -> findings.LintResult:
    """Lint files and folders (folders are searched for ``*.yaml``, ``*.yml``, ``*.json``)."""
    started = time.perf_counter()
    files, missing = collect_files(paths)
    sources = [source.read_file(path, name, limits) for path, name in files]
    result = _lint_sources(sources, fleet or context.FleetFacts.starter(), compile_cel, limits)
    return findings.LintResult(
        files=tuple(name for _, name in files),
        findings=findings.sort_findings([*result, *missing]),
        elapsed_s=time.perf_counter() - started,
    )


def lint_texts(
    texts: Mapping[str, str | bytes],
    fleet: context.FleetFacts | None = None,
    *,
    compile_cel: bool = True,
    limits: source.Limits = source.DEFAULT_LIMITS,
) -> findings.LintResult:
    """Lint in-memory files: ``{display name: content}``."""
    started = time.perf_counter()
    sources = [
        source.parse_bytes(t, name, limits) if isinstance(t, bytes) else source.parse_text(t, name, limits)
        for name, t in sorted(texts.items())
    ]
    result = _lint_sources(sources, fleet or context.FleetFacts.starter(), compile_cel, limits)
    return findings.LintResult(
        files=tuple(sorted(texts)), findings=findings.sort_findings(result), elapsed_s=time.perf_counter() - started
    )


def collect_files(paths: Sequence[str | Path]) -> tuple[list[tuple[Path, str]], list[findings.Finding]]:
    """Files to read, with the names findings will carry; a finding for each path that does not exist."""
    out: list[tuple[Path, str]] = []
    missing: list[findings.Finding] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for found in sorted(_walk(path)):
                out.append((found, str(found)))
        elif path.exists():
            out.append((path, str(raw)))
        else:
            missing.append(source.make_finding("input-encoding/unreadable", str(raw), source.Mark(0, 0),
                                               problem="no such file or folder"))
        if len(out) > MAX_FILES:
            raise errors.ConfigError(str(raw), [f"more than {MAX_FILES} files to lint"], hint="lint a smaller folder")
    seen: set[Path] = set()
    unique = []
    for path, name in out:
        if path.resolve() not in seen:
            seen.add(path.resolve())
            unique.append((path, name))
    return unique, missing


def _walk(folder: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.endswith(SUFFIXES) and not name.startswith("."):
                yield Path(root) / name


def _lint_sources(
    sources: Sequence[source.SourceFile], fleet: context.FleetFacts, compile_cel: bool, limits: source.Limits
) -> list[findings.Finding]:
    out: list[findings.Finding] = []
    docs: list[source.Document] = []
    for src in sources:
        out.extend(src.findings)
        top, ignored = first_document_only(src.documents)
        out.extend(ignored)
        budget = ReadBudget(limits.max_nodes - src.nodes, limits.max_expanded_bytes - src.expanded_bytes)
        for doc in top:
            expanded, problems = expand(doc, limits, budget)
            docs.extend(expanded)
            out.extend(problems)
    ctx = base.RuleContext(fleet=fleet, index=base.build_index(docs), cel=_compile(docs, compile_cel))
    for doc in docs:
        out.extend(run_rules(doc, ctx))
    return out


def run_rules(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for rule in RULES:
        if rule.check is None:
            continue
        try:
            yield from list(rule.check(doc, ctx))
        except Exception as exc:  # a bug in a rule must not hide the other rules' findings
            log.exception("rule %s crashed on %s document %d", rule.id, doc.file, doc.index)
            yield findings.Finding(
                rule="gpulab-internal", severity=findings.Severity.WARNING,
                message=f"gpulab's rule {rule.id} failed on this document ({type(exc).__name__}: {exc}); other rules still ran.",
                hint="This is a bug in gpulab, not in your manifest; please report it with the file.",
                file=doc.file, line=doc.start.line, column=doc.start.column, section="operations",
            )


@dataclass
class ReadBudget:
    """What re-reading the texts embedded in one file may cost in all: the file's own reading limits, shared,
    so that a ConfigMap repeating (or aliasing) an expensive config under many keys is read within them."""

    nodes: int
    expanded_bytes: int
    seen: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, limits: source.Limits) -> "ReadBudget":
        return cls(limits.max_nodes, limits.max_expanded_bytes)


def expand(
    doc: source.Document, limits: source.Limits, budget: ReadBudget | None = None
) -> tuple[list[source.Document], list[findings.Finding]]:
    """The document itself plus what it contains: ``List`` items and configs embedded in a ConfigMap."""
    docs = [doc]
    problems: list[findings.Finding] = []
    if manifests.classify(doc) is not manifests.DocType.OBJECT:
        return docs, problems
    kind = manifests.kind(doc)
    if kind == "List":
        docs.extend(_list_items(doc))
    elif kind == "ConfigMap":
        budget = budget or ReadBudget.of(limits)
        for key, value in manifests.as_map(manifests.as_map(doc.data).get("data")).items():
            if not isinstance(value, str) or not _looks_like_config(key, value) or value in budget.seen:
                continue  # the same text under another key was read once already: same findings
            if budget.nodes <= 0 or budget.expanded_bytes <= 0:
                where = doc.locate(("data", key))
                problems.append(source.make_finding("input-limits/embedded", doc.file, where, key=key,
                                                    limit=limits.max_nodes))
                break
            budget.seen.add(value)
            inner, found, cost = _embedded(doc, key, value, limits, budget)
            budget.nodes -= cost.nodes
            budget.expanded_bytes -= cost.expanded_bytes
            docs.extend(inner)
            problems.extend(found)
    return docs, problems


def _list_items(doc: source.Document) -> Iterator[source.Document]:
    items = manifests.as_list(manifests.as_map(doc.data).get("items"))
    by_item: dict[int, dict[source.YPath, source.Mark]] = {}
    for path, mark in doc.marks.items():
        if len(path) >= 2 and path[0] == "items" and isinstance(path[1], int):
            by_item.setdefault(path[1], {})[path[2:]] = mark
    for i, item in enumerate(items):
        marks = by_item.get(i, {})
        start = doc.marks.get(("items", i), doc.start)
        blocks = {p[2:]: o for p, o in doc.blocks.items() if p[:2] == ("items", i)}
        yield source.Document(doc.file, doc.index, item, marks, blocks, start, f"List item {i}")


def _looks_like_config(key: str, value: str) -> bool:
    """Worth parsing as a device-plugin or mig-parted config: the config-manager serves any key as a file, and
    the plugin reads YAML and JSON alike, so only the words decide (``classify`` then decides for real)."""
    lowered = value[:_SNIFF].lower()
    return any(word in lowered for word in ("version", "sharing", "flags", "imex", "mig-configs"))


def _embedded(
    doc: source.Document, key: str, value: str, limits: source.Limits, budget: ReadBudget
) -> tuple[list[source.Document], list[findings.Finding], source.SourceFile]:
    path = ("data", key)
    origin = doc.blocks.get(path)
    if origin is None:
        mark = doc.locate(path)
        origin = source.Origin(mark.line, mark.column, exact=False)
    where = f'ConfigMap "{manifests.name(doc)}", key "{key}"'
    left = replace(limits, max_nodes=max(1, budget.nodes), max_expanded_bytes=max(1, budget.expanded_bytes))
    parsed = source.parse_text(value, doc.file, left, origin, embedded_in=where)
    kept = [d for d in parsed.documents
            if manifests.classify(d) in (manifests.DocType.DEVICE_PLUGIN_CONFIG, manifests.DocType.MIG_PARTED_CONFIG)]
    kept, ignored = first_document_only(kept)
    return kept, list(parsed.findings) + ignored, parsed


def first_document_only(docs: Sequence[source.Document]) -> tuple[list[source.Document], list[findings.Finding]]:
    """The plugin reads one config file with ``sigs.k8s.io/yaml``, which decodes only the first YAML document:
    device-plugin configs after the first one of the same file (or ConfigMap value) are ignored, and said so."""
    kept: list[source.Document] = []
    problems: list[findings.Finding] = []
    first: source.Document | None = None
    for d in docs:
        if manifests.classify(d) is not manifests.DocType.DEVICE_PLUGIN_CONFIG:
            kept.append(d)
        elif first is None and d.index == 0:
            first = d
            kept.append(d)
        elif first is not None:
            problems.append(source.make_finding("device-plugin-config/second-document", d.file, d.start,
                                                first=first.start.line))
        else:
            kept.append(d)
    return kept, problems


def _compile(docs: Iterable[source.Document], wanted: bool) -> base.CelResults:
    items = sorted(set(dra_cel.collect(docs)))
    if not items:
        return base.CelResults()
    try:
        if not wanted:  # the static checks still read each selector's syntax tree (one celcheck process)
            cel_mod.parse(sorted({expr for expr, _ in items}))
            return base.CelResults(unavailable="CEL compilation was turned off for this run", parsed=True)
        verdicts = cel_mod.check(items, parse_too=True)
    except errors.BinariesUnavailable:
        return base.CelResults(unavailable="the celcheck helper is not installed")
    except errors.CommandFailed as exc:
        log.warning("celcheck failed: %s", exc)
        return base.CelResults(unavailable=f"the celcheck helper failed ({exc.output.strip()[:200]})")
    return base.CelResults(
        verdicts={item: base.CelVerdict(v.ok, v.error, v.cost) for item, v in zip(items, verdicts)}, parsed=True
    )


def rule_catalog() -> list[tuple[str, str, tuple[str, ...]]]:
    """(rule id, summary, message keys) for ``gpulab lint --list-rules``."""
    return [(r.id, r.summary, messages.keys_for(r.id)) for r in RULES]
