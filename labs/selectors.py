"""Kubernetes label selectors in their string form (``app=x,tier in (a,b),!legacy``), for recorded views.

A live API server filters by selector itself; a recorded bundle cannot, so lab checks match pods here.
Parsing is strict: a malformed selector is a lab-spec problem, reported when the lab loads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[A-Za-z0-9]?[-A-Za-z0-9_.]*"
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s+\(\s*({_VALUE}(?:\s*,\s*{_VALUE})*)\s*\)$")
_EQ = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS = re.compile(rf"^(!?)\s*({_KEY})$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # in | notin | exists | absent
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "absent":
            return self.key not in labels
        if self.op == "in":
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values


@dataclass(frozen=True)
class Selector:
    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


def _split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse(text: str) -> Selector:
    """Parse a selector; ``ValueError`` naming the part that is malformed. "" selects everything."""
    reqs: list[Requirement] = []
    for part in _split(text) if text.strip() else []:
        if m := _SET.match(part):
            values = frozenset(v.strip() for v in m.group(3).split(","))
            reqs.append(Requirement(m.group(1), m.group(2), values))
        elif m := _EQ.match(part):
            reqs.append(Requirement(m.group(1), "notin" if m.group(2) == "!=" else "in", frozenset({m.group(3)})))
        elif m := _EXISTS.match(part):
            reqs.append(Requirement(m.group(2), "absent" if m.group(1) else "exists"))
        else:
            raise ValueError(f"{part!r} is not a label requirement (key=value, key!=value, key in (a,b), key, !key)")
    return Selector(text, tuple(reqs))
