"""Typed REST access to the Kubernetes API over httpx (sync ``Client`` and async ``AsyncClient``).

Paths are plain API paths (``/api/v1/namespaces/default/pods``); helpers build them for the common kinds.
HTTP errors become ``ApiError`` (``NotFound``, ``Conflict``) in ``raise_for``, the one translation point.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from cluster import errors
from cluster.kube import kubeconfig

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

_CORE_PLURALS = {
    "Pod": "pods", "Node": "nodes", "Namespace": "namespaces", "ConfigMap": "configmaps", "Secret": "secrets",
    "Event": "events", "ResourceQuota": "resourcequotas", "ServiceAccount": "serviceaccounts",
    "Service": "services", "LimitRange": "limitranges", "Endpoints": "endpoints",
}


def _ssl_context(conn: kubeconfig.Connection) -> ssl.SSLContext | bool:
    if conn.insecure:
        return False
    ctx = ssl.create_default_context(cafile=conn.ca_file) if conn.ca_file else ssl.create_default_context()
    if conn.cert_file and conn.key_file:
        ctx.load_cert_chain(conn.cert_file, conn.key_file)
    return ctx


def _headers(conn: kubeconfig.Connection) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "gpulab/0.1"}
    if conn.token:
        headers["Authorization"] = f"Bearer {conn.token}"
    return headers


def raise_for(resp: httpx.Response) -> None:
    """Translate an error response into our exception hierarchy (the one place that does)."""
    if resp.status_code < 400:
        return
    try:
        body = resp.json()
        message = str(body.get("message", resp.text))
        reason = str(body.get("reason", resp.reason_phrase))
    except ValueError:
        message, reason = resp.text.strip(), resp.reason_phrase
    cls: type[errors.ApiError] = errors.ApiError
    if resp.status_code == 404:
        cls = errors.NotFound
    elif resp.status_code == 409:
        cls = errors.Conflict
    raise cls(resp.status_code, reason, message, method=resp.request.method, path=resp.request.url.path)


def _body(resp: httpx.Response) -> JSON:
    if not resp.content:
        return {}
    if "json" not in resp.headers.get("content-type", ""):
        return {"text": resp.text}
    data = resp.json()
    return data if isinstance(data, dict) else {"items": data}


def path_for(api_version: str, kind: str, namespace: str | None = None, name: str | None = None,
             plural: str | None = None) -> str:
    """The REST path of a kind (core kinds by table; others by lower-cased plural guess unless given)."""
    plural = plural or _CORE_PLURALS.get(kind) or (kind.lower() + ("es" if kind.endswith("s") else "s"))
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    return f"{base}/{name}" if name else base


class Client:
    """Synchronous client; cheap to create, closes its pool with ``close()`` or a ``with`` block."""

    def __init__(self, conn: kubeconfig.Connection, *, timeout: float = 30.0) -> None:
        self.conn = conn
        self._http = httpx.Client(base_url=conn.server, verify=_ssl_context(conn), headers=_headers(conn),
                                  timeout=httpx.Timeout(timeout, connect=5.0))

    @classmethod
    def from_kubeconfig(cls, path: Path, context: str | None = None, **kw: Any) -> Client:
        return cls(kubeconfig.load(path, context), **kw)

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
        with self._http.stream("GET", path, params=query, timeout=timeout_seconds + 10) as resp:
            raise_for(resp)
            for line in resp.iter_lines():
                if line:
                    yield json.loads(line)


class AsyncClient:
    """Asynchronous twin of ``Client`` for the agents, with a bounded connection pool."""

    def __init__(self, conn: kubeconfig.Connection, *, timeout: float = 30.0, max_connections: int = 32) -> None:
        self.conn = conn
        self._http = httpx.AsyncClient(
            base_url=conn.server, verify=_ssl_context(conn), headers=_headers(conn),
            timeout=httpx.Timeout(timeout, connect=5.0),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None,
                      content_type: str = "application/json") -> JSON:
        content = None if body is None else (body if isinstance(body, (str, bytes)) else json.dumps(body))
        headers = {"Content-Type": content_type} if body is not None else {}
        try:
            resp = await self._http.request(method, path, content=content, params=params, headers=headers)
        except httpx.TransportError as exc:
            raise errors.ClusterError(f"cannot reach the API server at {self.conn.server}: {exc}") from exc
        raise_for(resp)
        return _body(resp)

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
        query: dict[str, Any] = {"watch": "true", "timeoutSeconds": timeout_seconds, "allowWatchBookmarks": "true",
                                 **params}
        if resource_version:
            query["resourceVersion"] = resource_version
        async with self._http.stream("GET", path, params=query, timeout=timeout_seconds + 10) as resp:
            if resp.status_code >= 400:
                await resp.aread()
                raise_for(resp)
            async for line in resp.aiter_lines():
                if line:
                    yield json.loads(line)
