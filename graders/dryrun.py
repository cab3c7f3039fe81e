"""Server-side dry-run: let the API server judge each manifest and report its own words, at the right line.

Every Kubernetes object in the submission is sent with ``dryRun=All`` and strict field validation, as
``kubectl apply --dry-run=server`` would: created when it does not exist, applied (server-side apply) when it
does. Nothing is stored. A refusal becomes a ``Finding`` with rule id ``apiserver`` whose message quotes the
apiserver; each field error of an "is invalid" answer is placed on the line of the field it names. Kinds the
cluster does not serve are a warning, objects in a namespace the submission itself creates an information
note. An unreachable API server is our failure and raises ``ClusterError``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from cluster import errors
from cluster.kube import client as kube
from graders import findings, lint, live_messages, manifests, source

log = logging.getLogger(__name__)

FIELD_MANAGER = "gpulab-dry-run"
_SKIPPED_GROUPS = ("kustomize.config.k8s.io", "gpulab.dev")
_ERROR_TYPES = ("Invalid value", "Required value", "Unsupported value", "Forbidden", "Duplicate value", "Not found",
                "Too long", "Too many", "Internal error", "field not declared in schema")
_FIELD_ERROR = re.compile(r"(?<![\w.\]\[])\.?([A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*|\[[^\]\s]*\])*): (?:"
                          + "|".join(re.escape(t) for t in _ERROR_TYPES) + ")")
_UNKNOWN_FIELD = re.compile(r'unknown field "\.?([^"]+)"')
_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")
_MISSING_NS = re.compile(r'namespaces "([^"]+)" not found')


def dry_run_paths(client: kube.Client, paths: Sequence[str | Path], *, namespace: str = "default") -> tuple[findings.Finding, ...]:
    """Dry-run every object in files and folders (the same files ``lint_paths`` reads)."""
    files, _ = lint.collect_files(paths)
    return _run(client, [source.read_file(path, name) for path, name in files], namespace)


def dry_run_texts(client: kube.Client, texts: Mapping[str, str], *, namespace: str = "default") -> tuple[findings.Finding, ...]:
    """Dry-run every object in in-memory files ``{display name: text}``."""
    return _run(client, [source.parse_text(text, name) for name, text in sorted(texts.items())], namespace)


def with_server(result: findings.LintResult, client: kube.Client, paths: Sequence[str | Path], *,
                namespace: str = "default") -> findings.LintResult:
    """A lint result with the dry-run's findings added."""
    extra = dry_run_paths(client, paths, namespace=namespace)
    return findings.LintResult(result.files, findings.sort_findings([*result.findings, *extra]), result.elapsed_s)


def _run(client: kube.Client, sources: Sequence[source.SourceFile], namespace: str) -> tuple[findings.Finding, ...]:
    docs = [d for src in sources for doc in src.documents for d in lint.expand(doc, source.DEFAULT_LIMITS)[0]]
    objects = [d for d in docs if _is_object(d)]
    created_here = {manifests.name(d) for d in objects if manifests.kind(d) == "Namespace"}
    out: list[findings.Finding] = []
    for doc in objects:
        out.extend(_dry_run(client, doc, namespace, created_here))
    return findings.sort_findings(out)


def _is_object(doc: source.Document) -> bool:
    if manifests.classify(doc) is not manifests.DocType.OBJECT or manifests.kind(doc) in ("", "List"):
        return False
    group, version = manifests.api_group_version(doc)
    return bool(version) and group not in _SKIPPED_GROUPS


def _dry_run(client: kube.Client, doc: source.Document, default_ns: str,
             created_here: set[str]) -> Iterator[findings.Finding]:
    data = doc.data
    assert isinstance(data, dict)
    api_version, kind, name = str(data.get("apiVersion")), manifests.kind(doc), manifests.name(doc)
    what = f'{kind} "{name}"' if name else kind
    resource = client.mapper.lookup(api_version, kind)
    if resource is None:
        yield _finding(doc, ("apiVersion",), "apiserver/unknown-kind", kind=kind, api_version=api_version, what=what)
        return
    ns = manifests.as_str(manifests.as_map(data.get("metadata")).get("namespace")) or default_ns
    path = resource.path(namespace=ns)
    params = {"dryRun": "All", "fieldManager": FIELD_MANAGER, "fieldValidation": "Strict"}
    try:
        try:
            client.create(path, data, **params)
        except errors.Conflict:
            if not name:
                raise
            client.patch(f"{path}/{name}", json.dumps(data), kube.APPLY_PATCH, force="true", **params)
    except errors.ApiError as exc:
        yield from _refusal(doc, what, exc.api_message, ns, created_here)


def _refusal(doc: source.Document, what: str, text: str, ns: str, created_here: set[str]) -> Iterator[findings.Finding]:
    missing = _MISSING_NS.search(text)
    if missing and missing.group(1) in created_here:
        yield _finding(doc, ("metadata", "namespace"), "apiserver/namespace-in-submission", what=what,
                       namespace=missing.group(1))
        return
    for path, part in split_field_errors(text):
        yield _finding(doc, path or ("kind",), _classify(doc, part), what=what, text=part)


def split_field_errors(text: str) -> list[tuple[source.YPath, str]]:
    """One (field path, message) per field error of an apiserver answer; ``()`` where no field is named.

    ``The Pod "x" is invalid: [spec.a: Invalid value: ..., spec.b: Required value]`` gives two entries, each
    keeping the ``The Pod "x" is invalid:`` prefix so it reads as the apiserver's sentence.
    """
    head, sep, body = text.partition(" is invalid: ")
    if not sep:
        unknown = _UNKNOWN_FIELD.search(text)
        return [(parse_path(unknown.group(1)) if unknown else (), text)]
    prefix = head + sep
    inner = body[1:-1] if body.startswith("[") and body.endswith("]") else body
    starts = [m for m in _FIELD_ERROR.finditer(inner)]
    if not starts:
        return [((), text)]
    out = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(inner)
        part = inner[match.start():end].rstrip().removesuffix(",")
        out.append((parse_path(match.group(1)), prefix + part))
    return out


def parse_path(text: str) -> source.YPath:
    """``spec.containers[0].resources.limits[nvidia.com/gpu]`` -> ``("spec", "containers", 0, ...)``."""
    parts: list[source.PathPart] = []
    for name, key in _PATH_PART.findall(text):
        if name:
            parts.append(name)
        elif key.isdigit():
            parts.append(int(key))
        else:
            parts.append(key)
    return tuple(parts)


def _classify(doc: source.Document, text: str) -> str:
    group, _ = manifests.api_group_version(doc)
    if "must be an integer" in text:
        return "apiserver/rejected-integer"
    if "exceeded quota" in text:
        return "apiserver/rejected-quota"
    if group == "resource.k8s.io" or "resourceClaims" in text:
        return "apiserver/rejected-dra"
    return "apiserver/rejected"


def _finding(doc: source.Document, path: source.YPath, key: str, **fields: object) -> findings.Finding:
    said = live_messages.say(key, **fields)
    mark = _locate(doc, path)
    return findings.Finding(rule=said.rule, severity=said.severity, message=said.message, hint=said.hint,
                            file=doc.file, line=mark.line, column=mark.column, section=said.section)


def _locate(doc: source.Document, path: source.YPath) -> source.Mark:
    """The field's line; a request the apiserver defaulted from the limits points at the limit."""
    if path not in doc.marks and "requests" in path:
        as_limit = tuple("limits" if p == "requests" else p for p in path)
        if as_limit in doc.marks:
            return doc.marks[as_limit]
    return doc.locate(path)
