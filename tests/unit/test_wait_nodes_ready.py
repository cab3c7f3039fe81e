"""``ops.wait_nodes_ready`` lists the nodes, then watches from the list's resourceVersion. A watch stream that the
server breaks part-way (seen on a loaded machine during a class's bring-up: "peer closed connection without
sending complete message body") is listed again rather than failing the bring-up; a server that is really gone
still fails, with the list's own message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cluster import errors, ops


def _node(name: str, ready: bool, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class _Client:
    def __init__(self, lists: list[Any], watches: list[Any]) -> None:
        self.lists, self.watches, self.listed = lists, watches, 0

    def get(self, path: str) -> dict[str, Any]:
        assert path == "/api/v1/nodes"
        self.listed += 1
        found = self.lists[min(self.listed - 1, len(self.lists) - 1)]
        if isinstance(found, Exception):
            raise found
        return {"metadata": {"resourceVersion": "10"}, "items": found}

    def watch(self, path: str, **_: Any) -> Iterator[dict[str, Any]]:
        step = self.watches.pop(0)
        for event in step:
            if isinstance(event, Exception):
                raise event
            yield event


BROKEN = errors.ClusterError("cannot reach the API server at https://127.0.0.1:1: peer closed connection without "
                             "sending complete message body (incomplete chunked read)")


def test_a_watch_broken_part_way_is_listed_again() -> None:
    client = _Client(lists=[[_node("a", False, "9")], [_node("a", True, "11")], [_node("a", True, "11")]],
                     watches=[[{"type": "MODIFIED", "object": _node("a", False, "10")}, BROKEN]])
    found = ops.wait_nodes_ready(client, {"a"}, timeout=10)  # type: ignore[arg-type]
    assert [n.name for n in found if n.ready] == ["a"] and client.listed == 3


def test_a_server_that_is_gone_still_fails_with_the_lists_message() -> None:
    gone = errors.ClusterError("cannot reach the API server at https://127.0.0.1:1: connection refused")
    client = _Client(lists=[[_node("a", False, "9")], gone], watches=[[BROKEN]])
    with pytest.raises(errors.ClusterError, match="connection refused"):
        ops.wait_nodes_ready(client, {"a"}, timeout=10)  # type: ignore[arg-type]
