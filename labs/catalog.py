"""The labs that ship with gpulab: every ``labs/<id>/lab.yaml`` folder, loaded once per process."""

from __future__ import annotations

import functools
from pathlib import Path

from cluster import errors
from labs import loader
from labs.spec import LabSpec

ROOT = Path(__file__).resolve().parent


def ids() -> list[str]:
    """The ids of the built-in labs, in course order."""
    return sorted(d.name for d in ROOT.iterdir()
                  if d.is_dir() and loader.ID_PATTERN.match(d.name) and (d / "lab.yaml").is_file())


@functools.lru_cache(maxsize=None)
def get(lab_id: str) -> LabSpec:
    """The spec of one built-in lab; ``ConfigError`` naming the known labs when there is no such lab."""
    known = ids()
    if lab_id not in known:
        close = [k for k in known if k.startswith(lab_id[:2])] if len(lab_id) >= 2 else []
        raise errors.ConfigError("lab id", [f"there is no lab {lab_id!r}; the labs are: {', '.join(known)}"],
                                 hint=f"did you mean {close[0]}?" if close else "gpulab lab list")
    return loader.load(ROOT / lab_id)
