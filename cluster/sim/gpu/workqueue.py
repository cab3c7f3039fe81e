"""A keyed work queue: each key is reconciled by one worker at a time, and changes that arrive meanwhile
coalesce into one more run (the client-go workqueue contract, in asyncio)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class WorkQueue:
    def __init__(self, handler: Callable[[str], Awaitable[None]], workers: int = 16) -> None:
        self.handler = handler
        self.workers = workers
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._dirty: set[str] = set()

    def add(self, key: str) -> None:
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: str, seconds: float) -> None:
        asyncio.get_running_loop().call_later(seconds, self.add, key)

    @property
    def idle(self) -> bool:
        return not (self._queued or self._active)

    def idle_except(self, key: str) -> bool:
        """Idle but for ``key`` itself (asked by the handler of ``key`` as it finishes)."""
        return not self._queued and self._active <= {key}

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            if key in self._active:
                self._dirty.add(key)
                continue
            self._active.add(key)
            try:
                await self.handler(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # one broken key must not stop the queue
                log.exception("reconciling %s failed", key)
                self.add_after(key, 2.0)
            finally:
                self._active.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    self.add(key)

    async def run(self) -> None:
        await asyncio.gather(*(self._worker() for _ in range(self.workers)))
