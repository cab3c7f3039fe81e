"""Read-only views of a cluster for lab checks: live (the API server) or recorded (an evidence bundle).

A check asks for API paths (``/api/v1/namespaces/lab-03/pods/stuck``) with optional query parameters and
gets plain JSON back, or ``None`` when the object does not exist. ``RecordingView`` remembers every answer
so that ``lab.submit()`` can write exactly what the checks looked at; ``RecordedView`` answers from such a
record, so the same checks grade offline. A recorded view never guesses: a read it has no record of raises
``MissingEvidence``, which checks turn into a failed check that says what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import urlencode

from cluster import errors
from cluster.kube.client import Client

JSON = dict[str, Any]


class MissingEvidence(LookupError):
    """A recorded view was asked for something the bundle did not record."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class ClusterView(Protocol):
    live: bool

    def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON | None:
        """The object (or list) at ``path``; ``None`` when the API server says it does not exist."""
        ...


def key(path: str, params: Mapping[str, str] | None = None) -> str:
    """The record key of a read: the path, then the query sorted by name."""
    return f"{path}?{urlencode(sorted(params.items()))}" if params else path


def items(view: ClusterView, path: str, params: Mapping[str, str] | None = None) -> list[JSON]:
    found = view.get(path, params)
    raw = found.get("items") if found else None
    return [i for i in raw if isinstance(i, dict)] if isinstance(raw, list) else []


class LiveView:
    """Reads straight from the API server."""

    live = True

    def __init__(self, client: Client) -> None:
        self.client = client

    def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON | None:
        try:
            return self.client.get(path, **dict(params or {}))
        except errors.NotFound:
            return None


class RecordingView:
    """A live view that keeps every answer (the makings of an evidence bundle)."""

    live = True

    def __init__(self, inner: ClusterView) -> None:
        self.inner = inner
        self.record: dict[str, JSON | None] = {}

    def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON | None:
        found = self.inner.get(path, params)
        self.record[key(path, params)] = found
        return found


class RecordedView:
    """Answers from a record; an unrecorded read is ``MissingEvidence``, never a guess."""

    live = False

    def __init__(self, record: Mapping[str, JSON | None]) -> None:
        self.record = record

    def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON | None:
        k = key(path, params)
        if k not in self.record:
            raise MissingEvidence(k)
        return self.record[k]
