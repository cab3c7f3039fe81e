"""A minimal list-then-watch loop with reconnects, shared by the simulated agents.

It keeps a local cache of objects by ``namespace/name`` and calls a handler for every change. A watch that
ends, breaks or expires (410 Gone) is resumed or re-listed; the loop stops only when cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from cluster import errors
from cluster.kube.client import AsyncClient

log = logging.getLogger(__name__)

Handler = Callable[[str, dict[str, Any]], Awaitable[None]]


def key_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Informer:
    def __init__(self, client: AsyncClient, path: str, handler: Handler, **params: Any) -> None:
        self.client = client
        self.path = path
        self.handler = handler
        self.params = params
        self.cache: dict[str, dict[str, Any]] = {}
        self.synced = asyncio.Event()

    async def _list(self) -> str:
        listing = await self.client.get(self.path, **self.params)
        fresh = {key_of(o): o for o in listing.get("items", [])}
        for gone in set(self.cache) - set(fresh):
            old = self.cache.pop(gone)
            await self._dispatch("DELETED", old)
        for obj in fresh.values():
            self.cache[key_of(obj)] = obj
            await self._dispatch("ADDED", obj)
        self.synced.set()
        return str(listing.get("metadata", {}).get("resourceVersion", ""))

    async def _dispatch(self, kind: str, obj: dict[str, Any]) -> None:
        try:
            await self.handler(kind, obj)
        except errors.CourseError as exc:
            log.warning("%s handler for %s failed: %s", self.path, key_of(obj), exc)
        except Exception:  # a bug in one handler call must not stop the agent
            log.exception("%s handler for %s crashed", self.path, key_of(obj))

    async def run(self) -> None:
        rv = ""
        while True:
            try:
                if not rv:
                    rv = await self._list()
                async for event in self.client.watch(self.path, resource_version=rv, timeout_seconds=240,
                                                     **self.params):
                    etype, obj = event.get("type"), event.get("object", {})
                    if etype == "ERROR":
                        if obj.get("code") == 410:
                            rv = ""
                        break
                    rv = str(obj.get("metadata", {}).get("resourceVersion", rv))
                    if etype == "BOOKMARK":
                        continue
                    if etype == "DELETED":
                        self.cache.pop(key_of(obj), None)
                    else:
                        self.cache[key_of(obj)] = obj
                    await self._dispatch(str(etype), obj)
            except asyncio.CancelledError:
                raise
            except errors.ApiError as exc:
                if exc.status == 410:
                    rv = ""
                else:
                    log.warning("watch %s: %s", self.path, exc)
                    await asyncio.sleep(1.0)
            except Exception as exc:  # connection dropped, apiserver restarting: retry
                log.info("watch %s interrupted (%s); retrying", self.path, type(exc).__name__)
                await asyncio.sleep(1.0)
