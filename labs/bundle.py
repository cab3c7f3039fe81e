"""Evidence bundles: one versioned JSON file with a learner's files and the cluster reads a lab's checks made.

``lab.submit()`` writes one; ``gpulab grade --bundle`` and nbgrader read it and run the same checks offline.
Reading is strict and bounded: a bundle that is too large, not JSON, of another version or shape is a
``ConfigError`` listing every problem (batch grading records it and moves on).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import errors
from labs import loader, spec

KIND = "EvidenceBundle"
FILE_NAME = "evidence.json"
MAX_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Bundle:
    lab: str
    lab_version: int
    files: dict[str, bytes]
    record: dict[str, dict[str, Any] | None]


def _file_entry(data: bytes) -> dict[str, str]:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def dumps(bundle: Bundle) -> str:
    payload = {
        "apiVersion": spec.API_VERSION, "kind": KIND, "lab": bundle.lab, "labVersion": bundle.lab_version,
        "files": {name: _file_entry(data) for name, data in sorted(bundle.files.items())},
        "record": dict(sorted(bundle.record.items())),
    }
    return json.dumps(payload, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def write(path: Path, bundle: Bundle) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dumps(bundle), encoding="utf-8")
    tmp.replace(path)
    return path


def read(path: Path) -> Bundle:
    """Read and validate a bundle; ``ConfigError`` with every problem when it cannot be used."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise errors.ConfigError(str(path), [f"is {size} bytes, more than the {MAX_BYTES} a bundle may be"])
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise errors.ConfigError(str(path), [f"cannot be read: {exc.strerror or exc}"],
                                 hint="check the path; `gpulab lab submit` writes evidence.json") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise errors.ConfigError(str(path), [f"is not a JSON evidence bundle: {exc}"]) from exc
    return parse(raw, str(path))


def parse(raw: Any, source: str) -> Bundle:
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise errors.ConfigError(source, ["must be a JSON object"])
    version = loader.version_problem(raw.get("apiVersion"), "evidence bundle")
    if version:
        problems.append(f"apiVersion: {version}")
    if raw.get("kind") != KIND:
        problems.append(f"kind: must be {KIND}, got {raw.get('kind')!r}")
    lab, lab_version = raw.get("lab"), raw.get("labVersion")
    if not isinstance(lab, str) or not lab:
        problems.append("lab: must be a lab id")
    if isinstance(lab_version, bool) or not isinstance(lab_version, int):
        problems.append("labVersion: must be a whole number")
        lab_version = 0
    files = _files(raw.get("files"), problems)
    record = raw.get("record")
    if not isinstance(record, dict) or not all(isinstance(v, dict) or v is None for v in record.values()):
        problems.append("record: must map API reads to objects (or null)")
        record = {}
    if problems:
        raise errors.ConfigError(source, problems, hint="submit again with `gpulab lab submit` (or lab.submit())")
    return Bundle(str(lab), int(lab_version), files, dict(record))


def _files(raw: Any, problems: list[str]) -> dict[str, bytes]:
    if not isinstance(raw, dict):
        problems.append("files: must map file names to {text} or {base64}")
        return {}
    out: dict[str, bytes] = {}
    for name, entry in raw.items():
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            out[name] = entry["text"].encode("utf-8", "surrogatepass")
        elif isinstance(entry, dict) and isinstance(entry.get("base64"), str):
            try:
                out[name] = base64.b64decode(entry["base64"], validate=True)
            except ValueError:
                problems.append(f"files.{name}: base64 content does not decode")
        else:
            problems.append(f"files.{name}: must be {{text: ...}} or {{base64: ...}}")
    return out
