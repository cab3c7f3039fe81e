"""The one REST mapping: (apiVersion, kind) -> resource name and scope, from the API server's discovery.

Like client-go's deferred discovery RESTMapper, each group version is asked once (``GET /apis/<group>/<version>``)
and cached; a kind that is not in the cache makes the mapper ask again, at most once every ``REFRESH_S`` seconds,
so a CRD installed a moment ago (the GPU Operator's ClusterPolicy) resolves without a restart. Nothing here
guesses a plural from a kind name.

Decisions taken before a cluster is contacted (what a lab would change on someone else's cluster) use
``recorded()``: the discovery answers of the API server we ship, recorded from it by
``tests/e2e/test_local_control_plane.py`` (which fails when they drift), plus the CRDs we install.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping as MappingT
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cluster import errors

__all__ = ["Mapping", "RESTMapper", "live", "recorded", "resources_of", "RECORDED_FILE", "REFRESH_S"]

REFRESH_S = 2.0
RECORDED_FILE = Path(__file__).with_name("discovery.json")
_CRD_DIR = Path(__file__).resolve().parents[1] / "gpu" / "crds"

Fetch = Callable[[str], "MappingT[str, Any] | None"]  # group version -> its APIResourceList, None when not served


@dataclass(frozen=True)
class Mapping:
    """Where one kind lives: ``/apis/<group_version>[/namespaces/<ns>]/<resource>``."""

    group_version: str
    kind: str
    resource: str
    namespaced: bool

    def path(self, name: str | None = None, namespace: str | None = None) -> str:
        """The collection (no ``name``) or object path; namespaced kinds default to namespace ``default``."""
        base = f"/api/{self.group_version}" if "/" not in self.group_version else f"/apis/{self.group_version}"
        if self.namespaced:
            base += f"/namespaces/{namespace or 'default'}"
        base += f"/{self.resource}"
        return f"{base}/{name}" if name else base


def resources_of(listing: MappingT[str, Any] | None, group_version: str) -> dict[str, Mapping]:
    """The kinds of one APIResourceList (subresources such as ``pods/status`` left out)."""
    out: dict[str, Mapping] = {}
    for r in (listing or {}).get("resources") or []:
        if not isinstance(r, dict) or "/" in str(r.get("name", "/")) or not r.get("kind"):
            continue
        out.setdefault(str(r["kind"]), Mapping(group_version, str(r["kind"]), str(r["name"]), bool(r.get("namespaced"))))
    return out


class RESTMapper:
    """Kinds to resources, one discovery request per group version, cached; thread-safe."""

    def __init__(self, fetch: Fetch | None = None, known: MappingT[str, MappingT[str, Mapping]] | None = None) -> None:
        self._fetch = fetch
        self._cache: dict[str, dict[str, Mapping]] = {gv: dict(kinds) for gv, kinds in (known or {}).items()}
        self._asked: dict[str, float] = {}
        self._lock = threading.Lock()

    def lookup(self, api_version: str, kind: str) -> Mapping | None:
        """The mapping of a kind, or None when the server does not serve it in that group version."""
        with self._lock:
            got = self._cache.get(api_version, {}).get(kind)
            if got is not None or self._fetch is None:
                return got
            if time.monotonic() - self._asked.get(api_version, -REFRESH_S) < REFRESH_S:
                return None
            self._asked[api_version] = time.monotonic()
            self._cache[api_version] = resources_of(self._fetch(api_version), api_version)
            return self._cache[api_version].get(kind)

    def mapping(self, api_version: str, kind: str) -> Mapping:
        """As ``lookup``, but a kind the server does not serve is a ``ConfigError`` (kubectl's "no matches")."""
        got = self.lookup(api_version, kind)
        if got is None:
            raise errors.ConfigError(f"{kind} in {api_version}", [
                f'the API server serves no kind "{kind}" in version "{api_version}" (is its CRD installed? '
                "kubectl api-resources lists what it serves)"])
        return got

    def path(self, api_version: str, kind: str, name: str | None = None, namespace: str | None = None) -> str:
        return self.mapping(api_version, kind).path(name, namespace)

    def namespaced(self, api_version: str, kind: str) -> bool | None:
        """Whether the kind lives in namespaces; None when it is not served."""
        got = self.lookup(api_version, kind)
        return None if got is None else got.namespaced


def live(get: Callable[[str], MappingT[str, Any]]) -> RESTMapper:
    """A mapper that asks an API server through ``get(path)`` (a client's ``get``)."""

    def fetch(group_version: str) -> MappingT[str, Any] | None:
        path = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        try:
            return get(path)
        except errors.NotFound:
            return None

    return RESTMapper(fetch)


@lru_cache(maxsize=1)
def _recorded_kinds() -> dict[str, dict[str, Mapping]]:
    data = json.loads(RECORDED_FILE.read_text())
    return {gv: resources_of(listing, gv) for gv, listing in data["groupVersions"].items()}


@lru_cache(maxsize=1)
def _our_crd_kinds() -> dict[str, dict[str, Mapping]]:
    return crd_kinds(sorted(_CRD_DIR.glob("*.yaml")))


def _from_our_crds(group_version: str) -> MappingT[str, Any] | None:
    """What the shipped server answers for a group version once our CRDs are installed; the CRD files are read
    only when a kind the built-in answers lack is asked for (the ClusterPolicy CRD is 118 kB)."""
    kinds = {**_recorded_kinds().get(group_version, {}), **_our_crd_kinds().get(group_version, {})}
    if not kinds:
        return None
    return {"resources": [{"name": m.resource, "kind": m.kind, "namespaced": m.namespaced} for m in kinds.values()]}


def crd_kinds(files: Iterable[Path]) -> dict[str, dict[str, Mapping]]:
    import yaml

    loader: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader  # the CRD is 118 kB: libyaml when present
    out: dict[str, dict[str, Mapping]] = {}
    for file in files:
        for doc in yaml.load_all(file.read_text(), Loader=loader):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec.get("versions") or []:
                gv = f"{spec['group']}/{version['name']}"
                out.setdefault(gv, {})[spec["names"]["kind"]] = Mapping(
                    gv, spec["names"]["kind"], spec["names"]["plural"], spec.get("scope") == "Namespaced")
    return out


def recorded() -> RESTMapper:
    """The mapping of the API server we ship and of our CRDs, without contacting any server."""
    return RESTMapper(_from_our_crds, known=_recorded_kinds())
