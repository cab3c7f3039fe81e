"""Predictions a learner records before the cluster shows the answer ("predict, then check").

A lab that asks "how many shared GPUs will t4-0 advertise?" wants the learner's guess *before* they look. The
learner records it with ``lab.predict("t4-shared", 4)`` in the notebook or ``gpulab lab predict 04a t4-shared 4``;
it lands in ``predictions.yaml`` in the lab's folder and, as a *stamp*, in the cluster: an immutable ConfigMap
``gpulab-prediction-<key>`` in the lab's namespace holding the value, whose ``creationTimestamp`` the API server
writes. A ``prediction`` check (``labs.checks.live.PredictionRule``) compares the value with what the cluster
shows and judges "before the reveal" on the API server's two times, the stamp's and the revealing object's:
never on the file's ``at``, which the learner can write (it is shown, not trusted). A stamp cannot be edited, only
replaced, and a replacement is dated anew.

The file is one mapping ``key -> {value, at}``; it travels with the learner's other files into the evidence
bundle. Reading it never raises: a broken file is reported by the check that needs it. Grading by replay
(``labs.replay``) cannot know when the learner predicted: it stamps the handed-in predictions before it redoes
anything (``replay_stamps``), so there the order is not judged.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from cluster import errors
from cluster.kube.client import Client
from graders import source

FILE = "predictions.yaml"
HEADER = ("# Your predictions, each with the time you recorded it (UTC). Written by lab.predict(...) or\n"
          "# `gpulab lab predict LAB KEY VALUE`, which also record each in the cluster, dated by the API server:\n"
          "# that record is what shows a prediction came before the reveal (editing this file does not).\n")
_KEY = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
MAX_TEXT = 200
STAMP_PREFIX = "gpulab-prediction-"
STAMP_LABEL = "gpulab.dev/prediction"


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
           when: datetime | None = None, stamp_in: tuple[Client, str] | None = None) -> Prediction:
    """Record (or replace) prediction ``key`` in ``folder/predictions.yaml``; ``keys``: the ones the lab asks for.

    ``stamp_in`` (a client and the lab's namespace): stamp it in the cluster first (``stamp``) and write the API
    server's time into the file; what the prediction checks judge the order on."""
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
    if stamp_in is not None:
        when = stamp(*stamp_in, key, value)
    made = Prediction(key, value, when or now())
    current[key] = made
    body = {k: {"value": p.value, "at": p.at.strftime("%Y-%m-%dT%H:%M:%SZ")} for k, p in sorted(current.items())}
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".predictions-", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(HEADER + yaml.safe_dump(body, sort_keys=True, default_flow_style=False))
    os.replace(tmp, path)
    return made


# --- stamps: the cluster's record of a prediction -------------------------------------------------------------


def stamp_name(key: str) -> str:
    return STAMP_PREFIX + key


def stamp_object(namespace: str, key: str, value: object) -> dict[str, Any]:
    """The ConfigMap that records prediction ``key``: immutable, so a changed prediction is a new object with a
    new ``creationTimestamp``. The value is JSON, so 4 and "4" stay apart."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
            "metadata": {"name": stamp_name(key), "namespace": namespace, "labels": {STAMP_LABEL: key}},
            "data": {"value": json.dumps(value)}}


def stamp(client: Client, namespace: str, key: str, value: object) -> datetime:
    """Stamp prediction ``key`` in ``namespace`` (replacing an earlier stamp); the API server's time of it."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        client.delete(f"{path}/{stamp_name(key)}")
    except errors.NotFound:
        pass
    try:
        made = client.create(path, stamp_object(namespace, key, value))
    except errors.CourseError as exc:
        raise PredictionError(f"the cluster did not take the record of prediction {key!r}: {exc}",
                              hint=f"kubectl -n {namespace} get configmap {stamp_name(key)} -o yaml") from exc
    meta = made.get("metadata") if isinstance(made, Mapping) else None
    at = parse_time(meta.get("creationTimestamp") if isinstance(meta, Mapping) else None)
    if at is None:
        raise PredictionError(f"the API server gave the record of prediction {key!r} no creation time")
    return at


def stamp_file(client: Client, folder: Path, asked: Mapping[str, str]) -> list[Prediction]:
    """Stamp the predictions of ``folder/predictions.yaml`` that the lab asks for now (``asked``: key -> the
    namespace of its stamp; a solve records the solution's before its steps reveal anything) and write the API
    server's times into the file; none when there is no file."""
    path = folder / FILE
    made, problem = read(path.read_bytes() if path.is_file() and not path.is_symlink() else None)
    if problem:
        raise PredictionError(f"{problem}; fix or delete {path}")
    return [record(folder, key, p.value, stamp_in=(client, asked[key])) for key, p in sorted(made.items())
            if key in asked]


def stamped(obj: object) -> tuple[object, datetime | None] | None:
    """The value a stamp holds and its creation time (None when the view keeps no times), or None when ``obj`` is
    not a readable stamp."""
    if not isinstance(obj, Mapping):
        return None
    data, meta = obj.get("data"), obj.get("metadata")
    text = data.get("value") if isinstance(data, Mapping) else None
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value, parse_time(meta.get("creationTimestamp") if isinstance(meta, Mapping) else None)


def same(a: object, b: object) -> bool:
    """The same prediction: equal and of the same type (true is not 1, 4 is not "4")."""
    return type(a) is type(b) and a == b


def replay_stamps(data: bytes | None, asked: Mapping[str, str]) -> list[dict[str, Any]]:
    """The stamps of a handed-in predictions file, for a replay to apply before it redoes anything: offline, when
    the learner predicted cannot be known, so grading by replay compares the values and does not judge the order.
    Only the keys the lab asks for (``asked``: key -> namespace), so a file cannot make the grader create more; a
    file that cannot be read gives none (the checks say why)."""
    made, problem = read(data)
    return [] if problem else [stamp_object(asked[key], key, p.value) for key, p in sorted(made.items())
                               if key in asked]
