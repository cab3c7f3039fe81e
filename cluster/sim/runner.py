"""Process plumbing shared by the agents: logging, clean exit on SIGTERM, waiting for the API server."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from cluster import errors
from cluster.kube.client import AsyncClient

log = logging.getLogger("gpulab.agent")


async def retry_until_api(client: AsyncClient, timeout: float = 120.0) -> None:
    """Wait until the API server answers /readyz and lets us list nodes; agents may start before it is fully up,
    and on a cluster bootstrapped without the etcd seed before ``up`` has made their ClusterRoleBinding."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await client.request("GET", "/readyz")
            await client.request("GET", "/api/v1/nodes", params={"limit": "1"})
            return
        except errors.CourseError as exc:
            if loop.time() > deadline:
                raise
            log.debug("API not ready yet: %s", exc)
            await asyncio.sleep(0.1)


def run(coro: Coroutine[Any, Any, None]) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)

    async def main() -> None:
        task = asyncio.ensure_future(coro)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            log.info("stopping")

    asyncio.run(main())
