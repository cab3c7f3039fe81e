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

from cluster import errors
from cluster.kube import web


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
        self.http = web.WebSession()

    async def __aenter__(self) -> HubSession:
        await self.http.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.__aexit__(*exc)

    def _xsrf(self, path: str = "/hub/") -> str:
        """The XSRF cookie of the hub (``/hub/``) or of the learner's server (``/user/NAME/``)."""
        found = ""
        for cookie_path, value in self.http.cookies("_xsrf"):
            if path.startswith(cookie_path):
                found = value if len(cookie_path) > 1 or not found else found
        return found

    async def login(self) -> None:
        await self.http.request("GET", f"{self.url}/hub/login")
        form = {"username": self.user, "password": self.password, "_xsrf": self._xsrf()}
        resp = await self.http.request("POST", f"{self.url}/hub/login?next=", form=form, follow=False)
        if resp.status != 302:
            raise errors.CourseError(f"the hub refused {self.user}'s login (HTTP {resp.status})")

    async def start_server(self, timeout: float = 120) -> None:
        """Open the learner's server (the hub spawns it) and wait until it answers."""
        deadline = time.monotonic() + timeout
        await self.http.request("GET", f"{self.url}/hub/spawn/{self.user}")
        while time.monotonic() < deadline:
            # The page of the server, not its API: the hub's OAuth redirects give the server's own cookie.
            resp = await self.http.request("GET", f"{self.url}/user/{self.user}/lab")
            if resp.status == 200 and resp.path.startswith(f"/user/{self.user}/"):
                return
            await asyncio.sleep(0.2)
        raise errors.CourseError(f"{self.user}'s server did not start within {timeout:.0f} s")

    async def stop_server(self, timeout: float = 120) -> None:
        """Stop the learner's server as the hub's home page does, and wait until the hub says it is gone."""
        api = f"{self.url}/hub/api/users/{self.user}"
        headers = {"X-XSRFToken": self._xsrf("/hub/")}
        resp = await self.http.request("DELETE", f"{api}/server", headers=headers)
        if resp.status not in (202, 204):
            raise errors.CourseError(f"the hub did not stop {self.user}'s server (HTTP {resp.status})")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            model = (await self.http.request("GET", api, headers=headers)).json()
            if not model.get("servers") and not model.get("pending"):
                return
            await asyncio.sleep(0.5)
        raise errors.CourseError(f"{self.user}'s server did not stop within {timeout:.0f} s")

    async def run(self, code: str, timeout: float = 300) -> Executed:
        """Run ``code`` in a new kernel of the learner's server and return its status and text output."""
        base = f"{self.url}/user/{self.user}/api"
        headers = {"X-XSRFToken": self._xsrf(f"/user/{self.user}/")}
        resp = await self.http.request("POST", f"{base}/kernels", body={"name": "python3"}, headers=headers)
        if resp.status >= 300:
            raise errors.CourseError(f"could not start a kernel for {self.user} (HTTP {resp.status})")
        kernel = resp.json()
        ws_url = base.replace("http", "ws", 1) + f"/kernels/{kernel['id']}/channels"
        started = time.monotonic()
        try:
            async with self.http.websocket(ws_url, headers=headers) as ws:
                return await asyncio.wait_for(self._execute(ws, code, started), timeout)
        finally:
            await self.http.request("DELETE", f"{base}/kernels/{kernel['id']}", headers=headers)

    async def _execute(self, ws: web.WebSocket, code: str, started: float) -> Executed:
        msg_id = uuid.uuid4().hex
        await ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": self.user, "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        output: list[str] = []
        status = ""
        idle = False
        async for message in ws.messages():
            data: dict[str, Any] = json.loads(message)
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
