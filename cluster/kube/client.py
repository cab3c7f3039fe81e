"""Typed REST access to the Kubernetes API: sync ``Client`` over httpx, async ``AsyncClient`` over aiohttp.

Paths are plain API paths (``/api/v1/namespaces/default/pods``); ``Client.mapper`` (discovery, cached) builds
them for any kind the server serves.
HTTP errors become ``ApiError`` (``NotFound``, ``Conflict``) in ``raise_for``, the one translation point.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster import errors
from cluster.kube import kubeconfig, restmapper

__all__ = ["APPLY_PATCH", "AsyncClient", "Client", "JSON", "JSON_PATCH", "MERGE_PATCH", "STRATEGIC_PATCH",
           "raise_for", "raise_status"]

if TYPE_CHECKING:
    import aiohttp
    import httpx

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def _ssl_context(conn: kubeconfig.Connection) -> ssl.SSLContext | bool:
    if conn.insecure:
        return False
    ctx = ssl.create_default_context(cafile=conn.ca_file) if conn.ca_file else ssl.create_default_context()
    if conn.cert_file and conn.key_file:
        ctx.load_cert_chain(conn.cert_file, conn.key_file)
    return ctx


def _headers(conn: kubeconfig.Connection, impersonate: tuple[str, tuple[str, ...]] | None = None) -> list[tuple[str, str]]:
    headers = [("Accept", "application/json"), ("User-Agent", "gpulab/0.1")]
    if conn.token:
        headers.append(("Authorization", f"Bearer {conn.token}"))
    if impersonate is not None:  # the apiserver then authorizes every request as that user (RBAC), not as us
        headers.append(("Impersonate-User", impersonate[0]))
        headers.extend(("Impersonate-Group", g) for g in impersonate[1])
    return headers


def raise_for(resp: httpx.Response) -> None:
    """Translate an error response into our exception hierarchy (the one place that does)."""
    if resp.status_code < 400:
        return
    raise_status(resp.status_code, resp.reason_phrase, resp.text, resp.request.method, resp.request.url.path)


def raise_status(status: int, reason_phrase: str, text: str, method: str, path: str) -> None:
    """Raise ``ApiError`` (or ``NotFound``/``Conflict``) for an error status, with the API's own message."""
    try:
        body = json.loads(text)
        message = str(body.get("message", text))
        reason = str(body.get("reason", reason_phrase))
    except (ValueError, AttributeError):
        message, reason = text.strip(), reason_phrase
    cls: type[errors.ApiError] = errors.ApiError
    if status == 404:
        cls = errors.NotFound
    elif status == 409:
        cls = errors.Conflict
    raise cls(status, reason, message, method=method, path=path)


def _body(resp: httpx.Response) -> JSON:
    if not resp.content:
        return {}
    if "json" not in resp.headers.get("content-type", ""):
        return {"text": resp.text}
    data = resp.json()
    return data if isinstance(data, dict) else {"items": data}


class Client:
    """Synchronous client; cheap to create, closes its pool with ``close()`` or a ``with`` block."""

    def __init__(self, conn: kubeconfig.Connection, *, timeout: float = 30.0,
                 impersonate: tuple[str, tuple[str, ...]] | None = None) -> None:
        """``impersonate``: (user, groups) every request is made as (needs the impersonate verb)."""
        self.conn = conn
        self.kubeconfig: Path | None = None  # the file it was read from, when there is one (who owns the cluster)
        import httpx  # imported here, as aiohttp in AsyncClient: the agents use only AsyncClient (~6 MiB less)
        self._http = httpx.Client(base_url=conn.server, verify=_ssl_context(conn),
                                  headers=httpx.Headers(_headers(conn, impersonate)),
                                  timeout=httpx.Timeout(timeout, connect=5.0))
        self._mapper: restmapper.RESTMapper | None = None

    @property
    def mapper(self) -> restmapper.RESTMapper:
        """This server's REST mapping from its discovery answers (asked once per group version, cached)."""
        if self._mapper is None:
            self._mapper = restmapper.live(self.get)
        return self._mapper

    @classmethod
    def from_kubeconfig(cls, path: Path, context: str | None = None, **kw: Any) -> Client:
        client = cls(kubeconfig.load(path, context), **kw)
        client.kubeconfig = Path(path)
        return client

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None,
                content_type: str = "application/json") -> JSON:
        content = None if body is None else (body if isinstance(body, (str, bytes)) else json.dumps(body))
        headers = {"Content-Type": content_type} if body is not None else {}
        import httpx
        try:
            resp = self._http.request(method, path, content=content, params=params, headers=headers)
        except httpx.TransportError as exc:
            raise errors.ClusterError(f"cannot reach the API server at {self.conn.server}: {exc}",
                                      hint="gpulab status, then gpulab up") from exc
        raise_for(resp)
        return _body(resp)

    def get(self, path: str, **params: Any) -> JSON:
        return self.request("GET", path, params=params or None)

    def create(self, path: str, body: JSON, **params: Any) -> JSON:
        return self.request("POST", path, body=body, params=params or None)

    def replace(self, path: str, body: JSON) -> JSON:
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH, **params: Any) -> JSON:
        return self.request("PATCH", path, body=body, content_type=content_type, params=params or None)

    def delete(self, path: str, **params: Any) -> JSON:
        return self.request("DELETE", path, params=params or None)

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except errors.NotFound:
            return False
        return True

    def apply(self, path: str, body: JSON, *, manager: str = "gpulab", force: bool = True) -> JSON:
        """Server-side apply of one object at its named path."""
        return self.patch(path, json.dumps(body), APPLY_PATCH, fieldManager=manager, force=str(force).lower())

    def watch(self, path: str, *, resource_version: str | None = None, timeout_seconds: int = 300,
              **params: Any) -> Iterator[JSON]:
        query: dict[str, Any] = {"watch": "true", "timeoutSeconds": timeout_seconds, "allowWatchBookmarks": "true",
                                 **params}
        if resource_version:
            query["resourceVersion"] = resource_version
        import httpx
        try:
            with self._http.stream("GET", path, params=query, timeout=timeout_seconds + 10) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise_for(resp)
                for line in resp.iter_lines():
                    if line:
                        yield json.loads(line)
        except httpx.TransportError as exc:
            raise errors.ClusterError(f"cannot reach the API server at {self.conn.server}: {exc}",
                                      hint="gpulab status, then gpulab up") from exc


class AsyncClient:
    """Asynchronous twin of ``Client`` for the agents, with a bounded connection pool.

    It runs on aiohttp rather than httpx: at a 1,000-node fleet the agents send tens of requests a second, and
    httpx's asyncio connection pool cost ~18 ms of CPU a request against ~0.8 ms here (500 Lease renewals: 9.3
    against 0.38 CPU-s; docs/local-backend.md).
    The session is created on first use, inside the running event loop.
    """

    def __init__(self, conn: kubeconfig.Connection, *, timeout: float = 30.0, max_connections: int = 32) -> None:
        self.conn = conn
        self._base = conn.server.rstrip("/")
        self._timeout = timeout
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        import aiohttp  # here, not at the top: only the agents need it, and it takes ~0.3 s to import

        if self._session is None or self._session.closed:
            ssl_arg = _ssl_context(self.conn)
            connector = aiohttp.TCPConnector(limit=self._max_connections, ssl=ssl_arg)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=dict(_headers(self.conn)), trust_env=True,  # proxies from the env, as httpx
                timeout=aiohttp.ClientTimeout(total=self._timeout, connect=5.0))
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

    @staticmethod
    def _query(params: Mapping[str, Any] | None) -> dict[str, str] | None:
        if not params:
            return None
        return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in params.items()}

    def _unreachable(self, exc: BaseException) -> errors.ClusterError:
        return errors.ClusterError(f"cannot reach the API server at {self.conn.server}: {exc or type(exc).__name__}")

    async def request(self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None,
                      content_type: str = "application/json") -> JSON:
        import aiohttp

        content = None if body is None else (body if isinstance(body, (str, bytes)) else json.dumps(body))
        headers = {"Content-Type": content_type} if body is not None else {}
        try:
            async with self._http().request(method, self._base + path, data=content, params=self._query(params),
                                            headers=headers) as resp:
                raw = await resp.read()
                status, reason, ctype = resp.status, resp.reason or "", resp.headers.get("Content-Type", "")
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise self._unreachable(exc) from exc
        if status >= 400:
            raise_status(status, reason, raw.decode("utf-8", "replace"), method, path)
        if not raw:
            return {}
        if "json" not in ctype:
            return {"text": raw.decode("utf-8", "replace")}
        data = json.loads(raw)
        return data if isinstance(data, dict) else {"items": data}

    async def get(self, path: str, **params: Any) -> JSON:
        return await self.request("GET", path, params=params or None)

    async def create(self, path: str, body: JSON) -> JSON:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: JSON) -> JSON:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH) -> JSON:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def delete(self, path: str, **params: Any) -> JSON:
        return await self.request("DELETE", path, params=params or None)

    async def watch(self, path: str, *, resource_version: str | None = None, timeout_seconds: int = 300,
                    **params: Any) -> AsyncIterator[JSON]:
        """Events of one watch, one JSON object a line; lines may be long (a large object), so they are split here."""
        query: dict[str, Any] = {"watch": "true", "timeoutSeconds": timeout_seconds, "allowWatchBookmarks": "true",
                                 **params}
        if resource_version:
            query["resourceVersion"] = resource_version
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=timeout_seconds + 10, connect=5.0)
        try:
            async with self._http().get(self._base + path, params=self._query(query), timeout=timeout) as resp:
                if resp.status >= 400:
                    text = (await resp.read()).decode("utf-8", "replace")
                    raise_status(resp.status, resp.reason or "", text, "GET", path)
                pending = b""
                async for chunk in resp.content.iter_any():
                    pending += chunk
                    if b"\n" not in chunk:  # the middle of a long line: nothing to split yet
                        continue
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield json.loads(line)
                if pending.strip():
                    yield json.loads(pending)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise self._unreachable(exc) from exc
