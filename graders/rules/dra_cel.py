"""Rule ``dra-cel``: CEL device selectors compile, and use the attributes and types the driver publishes.

Two layers. The real Kubernetes CEL compiler (the ``celcheck`` helper, run once per lint) reports syntax
and type errors and the cost limit exactly as the apiserver would. Static checks then catch what compiles
but cannot work: an attribute the driver does not publish (the NVIDIA driver dropped ``index``), a
capacity read as an attribute, a version attribute compared with a string instead of ``semver(...)``, a
capacity compared with a number instead of ``quantity(...)``, and literals that ``quantity()`` or
``semver()`` would reject at run time; they read the syntax tree cel-go's parser builds (celcheck again), never
a guess at CEL's grammar. Without the helper, the rule says CEL was neither compiled nor checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from graders import cel_static, dra, findings, source
from graders.rules import base

RULE_ID = "dra-cel"


def collect(docs: Iterable[source.Document]) -> list[tuple[str, str]]:
    """Every (expression, field path) to send to the compiler, in document order."""
    return [(sel.expression, sel.api) for doc in docs for sel in dra.selectors(doc)]


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    reported_unavailable = False
    for sel in dra.selectors(doc):
        verdict = ctx.cel.verdicts.get((sel.expression, sel.api))
        if verdict is not None and not verdict.ok:
            key = "dra-cel/too-costly" if "cost limit" in verdict.error else "dra-cel/compile-error"
            yield base.emit(doc, sel.path, key, api=verdict.error, expression=_short(sel.expression))
        elif verdict is None and ctx.cel.unavailable and not reported_unavailable:
            reported_unavailable = True
            static = ("the attribute and type checks below still ran" if ctx.cel.parsed else
                      "the attribute and type checks need it too, so they did not run")
            yield base.emit(doc, sel.path, "dra-cel/not-compiled", reason=ctx.cel.unavailable, static=static)
        for issue in cel_static.analyse(sel.expression):
            yield base.emit(doc, sel.path, issue.key, **issue.fields)


def _short(text: str, limit: int = 120) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
