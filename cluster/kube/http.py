"""Plain HTTP outside the Kubernetes API (release downloads, a metrics endpoint), on the client layer's httpx.

``cluster.kube`` is the one package that imports an HTTP library (an import-linter contract); code elsewhere
that must fetch a URL does it here. Failures are ``HttpError`` with the URL and the status or cause in words.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = ["HttpError", "Probe", "Session", "at_path", "get_status", "get_text", "probe", "session"]


class HttpError(Exception):
    """A URL could not be fetched: refused, unreachable, timed out, or an error status."""


class Session:
    """A connection pool for several requests to the same hosts (redirects followed)."""

    def __init__(self, http: httpx.Client) -> None:
        self._http = http

    def text(self, url: str) -> str:
        try:
            resp = self._http.get(url)
        except httpx.HTTPError as exc:
            raise HttpError(f"{url}: {exc}") from exc
        if resp.status_code != 200:
            raise HttpError(f"{url}: HTTP {resp.status_code}")
        return resp.text

    def download(self, url: str, dest: Path, *, started: Callable[[int | None], None] = lambda total: None,
                 advanced: Callable[[int], None] = lambda n: None) -> None:
        """Stream ``url`` into ``dest``; ``started(total bytes or None)`` then ``advanced(n)`` per chunk."""
        try:
            with self._http.stream("GET", url) as resp:
                if resp.status_code != 200:
                    raise HttpError(f"{url}: HTTP {resp.status_code}")
                started(int(resp.headers.get("content-length", 0)) or None)
                with dest.open("wb") as f:
                    for chunk in resp.iter_bytes(1 << 20):
                        f.write(chunk)
                        advanced(len(chunk))
        except httpx.HTTPError as exc:
            raise HttpError(f"{url}: {exc}") from exc


@contextmanager
def session(timeout: float = 30.0, connect: float = 5.0) -> Iterator[Session]:
    with httpx.Client(timeout=httpx.Timeout(timeout, connect=connect), follow_redirects=True) as http:
        yield Session(http)


def at_path(url: str, path: str) -> str:
    """``url`` with its path replaced by ``path`` and its query and fragment dropped (an exporter's other port)."""
    return str(httpx.URL(url).copy_with(path=path, query=None, fragment=None))


def get_text(url: str, timeout: float = 10.0) -> str:
    """One GET of a text resource (a Prometheus endpoint, a checksum file)."""
    with session(timeout) as s:
        return s.text(url)


def get_status(url: str, timeout: float = 2.0) -> int:
    """The HTTP status of one GET (redirects not followed); ``HttpError`` when nothing answers."""
    try:
        return httpx.get(url, timeout=timeout).status_code
    except httpx.HTTPError as exc:
        raise HttpError(f"{url}: {exc}") from exc


class Probe:
    """Repeated health checks of one TLS endpoint (a component starting up)."""

    def __init__(self, http: httpx.Client) -> None:
        self._http = http

    def check(self, url: str) -> str:
        """"" when ``url`` answers 200; else what it said (status and the start of the body) or why it did not."""
        try:
            resp = self._http.get(url)
        except httpx.HTTPError as exc:
            return str(exc) or type(exc).__name__
        return "" if resp.status_code == 200 else f"HTTP {resp.status_code}: {resp.text[:200]}"


@contextmanager
def probe(*, ca: str | None = None, client_cert: tuple[str, str] | None = None,
          timeout: float = 2.0) -> Iterator[Probe]:
    """A ``Probe`` that trusts ``ca`` (no verification without one) and presents ``client_cert`` (cert, key)."""
    verify: ssl.SSLContext | bool = False
    if ca:
        verify = ssl.create_default_context(cafile=ca)
        if client_cert:
            verify.load_cert_chain(*client_cert)
    with httpx.Client(verify=verify, timeout=timeout) as http:
        yield Probe(http)
