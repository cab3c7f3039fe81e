"""How much a finding matters, below both the findings and their renderers (which colour by it)."""

from __future__ import annotations

import enum

__all__ = ["Severity"]


class Severity(str, enum.Enum):
    """How much a finding matters: errors stop the manifest from working, warnings probably do."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]
