"""A learner's side of the hub, over HTTP: log in, start the server, run code in a kernel of it.

Used by ``gpulab bench`` (login to lab-ready) and the class-mode tests; a browser does the same through the
pages. Only the hub's and Jupyter Server's documented REST and kernel-channel APIs are used.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import aiohttp

from cluster import errors


@dataclass(frozen=True)
class Executed:
    status: str  # "ok" or "error"
    output: str
    seconds: float


class HubSession:
    def __init__(self, url: str, user: str, password: str) -> None:
        self.url = url.rstrip("/")
        self.user = user
        self.password = password
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HubSession:
        self._http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._http is not None
        await self._http.close()

    @property
    def http(self) -> aiohttp.ClientSession:
        assert self._http is not None, "use HubSession in an async with block"
        return self._http

    def _xsrf(self, path: str = "/hub/") -> str:
        """The XSRF cookie of the hub (``/hub/``) or of the learner's server (``/user/NAME/``)."""
        found = ""
        for cookie in self.http.cookie_jar:
            if cookie.key == "_xsrf" and path.startswith(cookie["path"] or "/"):
                found = cookie.value if len(cookie["path"] or "/") > 1 or not found else found
        return found

    async def login(self) -> None:
        async with self.http.get(f"{self.url}/hub/login") as resp:
            await resp.read()
        form = {"username": self.user, "password": self.password, "_xsrf": self._xsrf()}
        async with self.http.post(f"{self.url}/hub/login?next=", data=form, allow_redirects=False) as resp:
            if resp.status != 302:
                raise errors.CourseError(f"the hub refused {self.user}'s login (HTTP {resp.status})")

    async def start_server(self, timeout: float = 120) -> None:
        """Open the learner's server (the hub spawns it) and wait until it answers."""
        deadline = time.monotonic() + timeout
        async with self.http.get(f"{self.url}/hub/spawn/{self.user}") as resp:
            await resp.read()
        while time.monotonic() < deadline:
            # The page of the server, not its API: the hub's OAuth redirects give the server's own cookie.
            async with self.http.get(f"{self.url}/user/{self.user}/lab") as resp:
                await resp.read()
                if resp.status == 200 and resp.url.path.startswith(f"/user/{self.user}/"):
                    return
            await asyncio.sleep(0.2)
        raise errors.CourseError(f"{self.user}'s server did not start within {timeout:.0f} s")

    async def stop_server(self, timeout: float = 120) -> None:
        """Stop the learner's server as the hub's home page does, and wait until the hub says it is gone."""
        api = f"{self.url}/hub/api/users/{self.user}"
        headers = {"X-XSRFToken": self._xsrf("/hub/")}
        async with self.http.delete(f"{api}/server", headers=headers) as resp:
            if resp.status not in (202, 204):
                raise errors.CourseError(f"the hub did not stop {self.user}'s server (HTTP {resp.status})")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            async with self.http.get(api, headers=headers) as resp:
                model = await resp.json()
            if not model.get("servers") and not model.get("pending"):
                return
            await asyncio.sleep(0.5)
        raise errors.CourseError(f"{self.user}'s server did not stop within {timeout:.0f} s")

    async def run(self, code: str, timeout: float = 300) -> Executed:
        """Run ``code`` in a new kernel of the learner's server and return its status and text output."""
        base = f"{self.url}/user/{self.user}/api"
        headers = {"X-XSRFToken": self._xsrf(f"/user/{self.user}/")}
        async with self.http.post(f"{base}/kernels", json={"name": "python3"}, headers=headers) as resp:
            if resp.status >= 300:
                raise errors.CourseError(f"could not start a kernel for {self.user} (HTTP {resp.status})")
            kernel = await resp.json()
        ws_url = base.replace("http", "ws", 1) + f"/kernels/{kernel['id']}/channels"
        started = time.monotonic()
        try:
            async with self.http.ws_connect(ws_url, headers=headers, max_msg_size=0) as ws:
                return await asyncio.wait_for(self._execute(ws, code, started), timeout)
        finally:
            async with self.http.delete(f"{base}/kernels/{kernel['id']}", headers=headers) as resp:
                await resp.read()

    async def _execute(self, ws: aiohttp.ClientWebSocketResponse, code: str, started: float) -> Executed:
        msg_id = uuid.uuid4().hex
        await ws.send_str(json.dumps({
            "header": {"msg_id": msg_id, "username": self.user, "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        output: list[str] = []
        status = ""
        idle = False
        async for message in ws:
            data: dict[str, Any] = json.loads(message.data)
            if data.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = data["msg_type"], data.get("content", {})
            if kind == "stream":
                output.append(content.get("text", ""))
            elif kind in ("execute_result", "display_data"):
                output.append(content.get("data", {}).get("text/plain", ""))
            elif kind == "error":
                output.append("\n".join(content.get("traceback", [])))
            elif kind == "execute_reply":
                status = content.get("status", "")
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
            if status and idle:
                break
        return Executed(status or "unknown", "".join(output), time.monotonic() - started)


async def login_to_lab_ready(url: str, user: str, password: str, lab_id: str) -> tuple[float, float, Executed]:
    """(seconds to a running server, seconds from login to the lab set up on the learner's cluster, the run)."""
    start = time.monotonic()
    async with HubSession(url, user, password) as hub:
        await hub.login()
        await hub.start_server()
        spawned = time.monotonic() - start
        done = await hub.run(f"import labs\nlab = labs.start({lab_id!r})\nprint('lab ready:', lab.id)")
        return spawned, time.monotonic() - start, done


def login_to_lab_ready_sync(url: str, user: str, password: str, lab_id: str) -> tuple[float, float, Executed]:
    return asyncio.run(login_to_lab_ready(url, user, password, lab_id))
