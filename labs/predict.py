"""Predictions a learner records before the cluster shows the answer ("predict, then check").

A lab that asks "how many shared GPUs will t4-0 advertise?" wants the learner's guess *before* they look. The
learner records it with ``lab.predict("t4-shared", 4)`` in the notebook or ``gpulab lab predict 04a t4-shared 4``;
it lands in ``predictions.yaml`` in the lab's folder, with the UTC time it was recorded. A ``prediction`` check
(``labs.checks.live.PredictionRule``) then compares it with what the cluster shows, and refuses a prediction
recorded after the object that reveals the answer was created.

The file is one mapping ``key -> {value, at}``; it travels with the learner's other files into the evidence
bundle. Reading it never raises: a broken file is reported by the check that needs it.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from cluster import errors
from graders import source

FILE = "predictions.yaml"
HEADER = ("# Your predictions, each with the time you recorded it (UTC). Written by lab.predict(...) or\n"
          "# `gpulab lab predict LAB KEY VALUE`; a prediction recorded after the reveal does not count.\n")
_KEY = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
MAX_TEXT = 200


class PredictionError(errors.CourseError):
    """A prediction that cannot be recorded (bad key or value, or the answer already shown), in words."""


@dataclass(frozen=True)
class Prediction:
    key: str
    value: object
    at: datetime

    def __str__(self) -> str:
        return f"recorded {self.key} = {self.value!r} at {self.at:%H:%M:%S} UTC"

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:
        printer.text(str(self))  # type: ignore[attr-defined]


def now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 time as Kubernetes writes it (``2026-11-26T18:00:00Z``), or None."""
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=timezone.utc)
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def value_of(text: str) -> object:
    """A value typed on a command line, read as YAML reads a scalar (``4`` is a number, ``yes`` a string)."""
    text = text.strip()
    if not text or len(text) > MAX_TEXT:
        raise PredictionError(f"a prediction is one value of 1 to {MAX_TEXT} characters")
    parsed = source.parse_text(text, "<prediction>")
    docs = parsed.documents
    value = docs[0].data if docs and not parsed.findings else text
    if isinstance(value, (dict, list)) or value is None:
        return text  # `a: b` or `[1]` typed on a command line is meant as text
    return value


def check_value(value: object) -> object:
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return value
    if isinstance(value, str) and value.strip() and len(value) <= MAX_TEXT:
        return value.strip()
    raise PredictionError(f"a prediction is a number, true/false or a short text (up to {MAX_TEXT} characters), "
                          f"not {type(value).__name__}")


def read(data: bytes | None) -> tuple[dict[str, Prediction], str]:
    """The predictions in a file's bytes, and a problem in words ("" when none). Missing file: no predictions."""
    if data is None:
        return {}, ""
    parsed = source.parse_bytes(data, FILE)
    bad = [f for f in parsed.findings if f.severity.value == "error"]
    if bad:
        return {}, f"{FILE}:{bad[0].line} cannot be read: {bad[0].message}"
    raw = parsed.documents[0].data if parsed.documents else None
    if raw is None:
        return {}, ""
    if not isinstance(raw, dict):
        return {}, f"{FILE} must be a mapping of prediction keys"
    out: dict[str, Prediction] = {}
    for key, entry in raw.items():
        at = parse_time(entry.get("at")) if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or "value" not in entry or at is None:
            return {}, f"{FILE}: {key!s} must have a value and the time it was recorded (at)"
        out[str(key)] = Prediction(str(key), entry["value"], at)
    return out, ""


def record(folder: Path, key: str, value: object, *, keys: tuple[str, ...] = (),
           when: datetime | None = None) -> Prediction:
    """Record (or replace) prediction ``key`` in ``folder/predictions.yaml``; ``keys``: the ones the lab asks for."""
    if not _KEY.match(key):
        raise PredictionError(f"{key!r} is not a prediction key (lowercase letters, digits and '-')")
    if keys and key not in keys:
        raise PredictionError(f"this lab asks for no prediction {key!r}; it asks for: {', '.join(keys)}")
    value = check_value(value)
    path = folder / FILE
    if path.is_symlink():
        raise PredictionError(f"{path} is a symbolic link; gpulab writes predictions only to a plain file")
    current, problem = read(path.read_bytes() if path.is_file() else None)
    if problem:
        raise PredictionError(f"{problem}; fix or delete {path} and record again")
    made = Prediction(key, value, when or now())
    current[key] = made
    body = {k: {"value": p.value, "at": p.at.strftime("%Y-%m-%dT%H:%M:%SZ")} for k, p in sorted(current.items())}
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".predictions-", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(HEADER + yaml.safe_dump(body, sort_keys=True, default_flow_style=False))
    os.replace(tmp, path)
    return made
