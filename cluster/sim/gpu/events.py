"""Kubernetes Events from the simulated components, the way a kubelet or an operator records them.

Node events go to the ``default`` namespace (where ``kubectl describe node`` finds them); pod events to the
pod's namespace. A repeated (object, reason, message) is counted up instead of creating a new event.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cluster import errors
from cluster.kube.client import AsyncClient
from cluster.sim import nodes

log = logging.getLogger(__name__)


class Recorder:
    def __init__(self, client: AsyncClient, component: str) -> None:
        self.client = client
        self.component = component
        self._seen: dict[tuple[str, str, str], tuple[str, str, int]] = {}  # -> (namespace, event name, count)

    async def record(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str, *,
                     host: str = "") -> None:
        meta = obj.get("metadata", {})
        kind = str(obj.get("kind") or ("Pod" if meta.get("namespace") else "Node"))
        ns = str(meta.get("namespace") or "default")
        key = (str(meta.get("uid", meta.get("name"))), reason, message)
        ts = nodes.now()
        try:
            if key in self._seen:
                ev_ns, ev_name, count = self._seen[key]
                await self.client.patch(f"/api/v1/namespaces/{ev_ns}/events/{ev_name}",
                                        {"count": count + 1, "lastTimestamp": ts})
                self._seen[key] = (ev_ns, ev_name, count + 1)
                return
            body = {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{meta.get('name')}.", "namespace": ns},
                "involvedObject": {"kind": kind, "name": meta.get("name"), "namespace": meta.get("namespace", ""),
                                   "uid": meta.get("uid", ""),
                                   "apiVersion": str(obj.get("apiVersion") or "v1")},
                "reason": reason, "message": message, "type": event_type,
                "source": {"component": self.component, **({"host": host} if host else {})},
                "reportingComponent": self.component, "reportingInstance": host or self.component,
                "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
            }
            created = await self.client.create(f"/api/v1/namespaces/{ns}/events", body)
            self._seen[key] = (ns, created["metadata"]["name"], 1)
        except errors.NotFound:
            self._seen.pop(key, None)
        except errors.CourseError as exc:
            log.warning("could not record event %s on %s: %s", reason, meta.get("name"), exc)
