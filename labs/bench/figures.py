"""The value type of one benchmark figure and its rendering."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["met"] = self.met
        return data

    def target_text(self) -> str:
        if self.target is None:
            return "-"
        return f"{'>=' if self.higher_is_better else '<='} {self.target:g} {self.unit}"
