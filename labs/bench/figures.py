"""The value types of the benchmark: one measured figure, one published reference figure, and the whole report.

A ``Figure`` with ``value=None`` was not measured; its ``note`` says why (a skipped section, a failure, a
part of the project that is not there yet). A ``Reference`` is a figure published by someone else (kind), shown
beside ours for comparison and never counted as measured here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = "gpulab.dev/bench/v1"


@dataclass(frozen=True)
class Figure:
    name: str
    value: float | None
    unit: str
    target: float | None = None
    higher_is_better: bool = False
    note: str = ""

    @property
    def met(self) -> bool | None:
        if self.target is None or self.value is None:
            return None
        return self.value >= self.target if self.higher_is_better else self.value <= self.target

    @property
    def measured(self) -> bool:
        return self.value is not None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["met"] = self.met
        return data

    def target_text(self) -> str:
        if self.target is None:
            return "-"
        return f"{'>=' if self.higher_is_better else '<='} {self.target:g} {self.unit}"

    def value_text(self) -> str:
        return "not measured" if self.value is None else f"{self.value:g} {self.unit}"


def not_measured(name: str, unit: str, reason: str, target: float | None = None,
                 higher_is_better: bool = False) -> Figure:
    return Figure(name, None, unit, target, higher_is_better, note=reason)


@dataclass(frozen=True)
class Reference:
    """A figure someone else published, with where it comes from; never measured here."""

    name: str
    value: float | None
    unit: str
    source: str
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "measured_here": False}


@dataclass(frozen=True)
class Report:
    quick: bool
    figures: tuple[Figure, ...]
    references: tuple[Reference, ...] = ()
    machine: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    errors: tuple[str, ...] = ()

    def missed(self) -> list[Figure]:
        return [f for f in self.figures if f.met is False]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "quick": self.quick,
            "seconds": round(self.seconds, 1),
            "machine": self.machine,
            "figures": [f.to_json() for f in self.figures],
            "references": [r.to_json() for r in self.references],
            "errors": list(self.errors),
            "summary": {
                "measured": sum(f.measured for f in self.figures),
                "not_measured": sum(not f.measured for f in self.figures),
                "targets_met": sum(f.met is True for f in self.figures),
                "targets_missed": sum(f.met is False for f in self.figures),
            },
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)
