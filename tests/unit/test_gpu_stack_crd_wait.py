"""The GPU stack waits for the ClusterPolicy CRD with a watch, not by asking for the policy every second (issue 17:
idle CPU), and a failing watch does not stop its policy loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from cluster import errors
from cluster.sim.gpu import names, stack

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class FakeClient:
    """Answers the stack's policy loop: no policy, no CRD, then a watch that reports the CRD (or fails)."""

    def __init__(self, crd_listed: bool = False, watch_fails: bool = False) -> None:
        self.crd_listed, self.watch_fails = crd_listed, watch_fails
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def get(self, path: str, **params: Any) -> dict[str, Any]:
        self.calls.append((path, params))
        if path == names.POLICY_PATH:
            raise errors.NotFound(404, "NotFound", "the server could not find the requested resource")
        assert path == CRDS and params == {"fieldSelector": f"metadata.name={names.CRD_NAME}"}
        return {"metadata": {"resourceVersion": "7"}, "items": [{"metadata": {}}] if self.crd_listed else []}

    async def watch(self, path: str, *, resource_version: str | None = None, timeout_seconds: int = 300,
                    **params: Any) -> AsyncIterator[dict[str, Any]]:
        self.calls.append((f"watch {path}", {"rv": resource_version, **params}))
        if self.watch_fails:
            raise errors.ClusterError("cannot reach the API server")
        yield {"type": "BOOKMARK", "object": {}}
        yield {"type": "ADDED", "object": {"metadata": {"name": names.CRD_NAME}}}


def _stack(client: FakeClient) -> stack.Stack:
    st = stack.Stack.__new__(stack.Stack)
    st.client = client  # type: ignore[assignment]
    return st


def test_wait_for_crd_watches_from_the_listing_and_returns_when_the_crd_is_added() -> None:
    client = FakeClient()
    asyncio.run(asyncio.wait_for(_stack(client).wait_for_crd(), 2))
    assert client.calls[-1] == (f"watch {CRDS}", {"rv": "7", "fieldSelector": f"metadata.name={names.CRD_NAME}"})


def test_policy_loop_makes_no_request_a_second_while_the_crd_is_missing(monkeypatch: Any) -> None:
    """Before, an idle cluster without the operator got one GET a second; now one list and one watch of the CRD."""
    client = FakeClient()
    st = _stack(client)
    seen: list[object] = []

    async def on_policy(obj: object) -> None:
        seen.append(obj)

    async def forever(path: str, **kw: Any) -> AsyncIterator[dict[str, Any]]:
        client.calls.append((f"watch {path}", {}))
        await asyncio.sleep(3600)
        yield {}

    monkeypatch.setattr(st, "on_policy", on_policy)
    monkeypatch.setattr(client, "watch", forever)

    async def run() -> None:
        try:
            await asyncio.wait_for(st.policy_loop(), 1.5)
        except TimeoutError:
            pass

    asyncio.run(run())
    assert [c[0] for c in client.calls] == [names.POLICY_PATH, CRDS, f"watch {CRDS}"]
    assert seen == [None]


def test_a_failing_crd_watch_does_not_end_the_policy_loop(monkeypatch: Any) -> None:
    client = FakeClient(watch_fails=True)
    st = _stack(client)
    monkeypatch.setattr(stack, "POLICY_POLL", 0.01)

    async def on_policy(obj: object) -> None:
        pass

    monkeypatch.setattr(st, "on_policy", on_policy)

    async def run() -> None:
        try:
            await asyncio.wait_for(st.policy_loop(), 0.5)
        except TimeoutError:
            pass

    asyncio.run(run())  # the loop was still retrying when the time ran out
    assert sum(1 for c in client.calls if c[0] == names.POLICY_PATH) > 3
