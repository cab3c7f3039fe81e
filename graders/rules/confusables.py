"""Rule ``confusable-characters``: keys (and identifier values) that contain look-alike or invisible characters.

``limіts`` with a Cyrillic ``і`` reads like ``limits`` but is a different key: the apiserver rejects it as
an unknown field or, in a map such as ``limits``, as an invalid resource name; a pod asking for
``nvidia.com/gрu`` gets no GPU. Kubernetes field names, label keys and resource names are ASCII, so any
other character in a key is reported, naming it and the ASCII letter it imitates.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

from graders import findings, manifests, source
from graders.rules import base

RULE_ID = "confusable-characters"

# Values of these fields are identifiers too (resource names, enum values, object references).
_IDENTIFIER_FIELDS = frozenset(
    {"apiVersion", "kind", "operator", "effect", "key", "deviceClassName", "priorityClassName", "preemptionPolicy",
     "allocationMode", "topologyManagerPolicy", "topologyManagerScope", "migStrategy", "name", "driver",
     "resourceClaimName", "resourceClaimTemplateName", "runtimeClassName", "schedulerName"}
)

# Letters that look like ASCII ones (Cyrillic, Greek, Latin variants) and invisible or dash-like marks.
_LOOKALIKE = {
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s",
    "ԁ": "d", "ӏ": "l", "һ": "h", "ԛ": "q", "ԝ": "w", "ɡ": "g", "ν": "v", "ο": "o", "α": "a", "ρ": "p",
    "τ": "t", "ι": "i", "κ": "k", "μ": "u", "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H",
    "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X", "Ι": "I", "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T",
    "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "−": "-", "․": ".", "／": "/", "∕": "/",
}
_INVISIBLE = frozenset({"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00a0", "\u00ad", "\u202f"})


def describe(ch: str) -> tuple[str, str]:
    """(Unicode name with code point, what it imitates)."""
    name = unicodedata.name(ch, "UNNAMED CHARACTER")
    label = f"U+{ord(ch):04X} {name}"
    if ch in _INVISIBLE:
        return label, "nothing (it is invisible)"
    ascii_form = _LOOKALIKE.get(ch) or unicodedata.normalize("NFKC", ch)
    if ascii_form.isascii() and ascii_form.strip():
        return label, f"'{ascii_form}'"
    return label, "no ASCII character"


def _first_odd(text: str) -> str | None:
    for ch in text:
        if not ch.isascii() or (ord(ch) < 0x20 and ch not in "\t\n"):
            return ch
    return None


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    for path, value in source.walk(doc.data):
        if not path:
            continue
        last = path[-1]
        if isinstance(last, str):
            odd = _first_odd(last)
            if odd is not None:
                name, looks = describe(odd)
                yield base.emit(doc, path, "confusable-characters/key", key=last, char=name, looks_like=looks,
                                clean=_ascii_version(last))
                continue
            if last in _IDENTIFIER_FIELDS and isinstance(value, str) and len(value) <= 253:
                odd = _first_odd(value)
                if odd is not None:
                    name, looks = describe(odd)
                    yield base.emit(doc, path, "confusable-characters/value", field=last, value=value, char=name,
                                    looks_like=looks, clean=_ascii_version(value))


def _ascii_version(text: str) -> str:
    out = []
    for ch in text:
        if ch in _INVISIBLE:
            continue
        mapped = _LOOKALIKE.get(ch) or unicodedata.normalize("NFKC", ch)
        out.append(mapped if mapped.isascii() else "?")
    return manifests.go_quote("".join(out))[1:-1]
