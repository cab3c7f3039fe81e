"""The simulated kubelet's device-manager checkpoint: which devices each admitted pod holds, kept in a file.

The real kubelet keeps this record in ``/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint``
(kubernetes ``pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go``: ``PodDeviceEntries`` of PodUID,
ContainerName, ResourceName and DeviceIDs, guarded by a checksum) and reads it back when it restarts, so a
restarted kubelet never hands out a device twice. Here the pod agent plays every node's kubelet, so one file holds
the entries of every simulated node, each also keyed by node. Admission decisions read only this record: a pod's
annotations can be written by anyone allowed to edit the pod (a tenant), so they are never trusted. The pod agent
is the only writer; this module must not talk to the API server.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """One container's devices of one resource (a ``PodDevicesEntry`` of the kubelet's checkpoint)."""

    node: str
    pod_uid: str
    container: str
    resource: str
    device_ids: tuple[str, ...]


class DeviceCheckpoint:
    """The record, in memory and (when ``path`` is given) on disk after every change, written atomically."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._pods: dict[str, list[Entry]] = {}  # pod UID -> its entries
        if path is not None:
            self._pods = _read(path)

    def taken(self, node: str, *, except_pod: str = "") -> set[str]:
        """Device IDs held on ``node`` by admitted pods (``except_pod``: a pod being admitted again)."""
        return {d for uid, entries in self._pods.items() if uid != except_pod
                for e in entries if e.node == node for d in e.device_ids}

    def entries(self, pod_uid: str) -> tuple[Entry, ...]:
        return tuple(self._pods.get(pod_uid, ()))

    def record(self, node: str, pod_uid: str, allocation: Mapping[str, Sequence[tuple[str, str]]]) -> None:
        """Store a pod's devices: container -> [(resource, device id)]. A pod with no devices leaves no entry."""
        entries: dict[tuple[str, str], list[str]] = {}
        for container, items in allocation.items():
            for resource, device in items:
                entries.setdefault((container, resource), []).append(device)
        found = [Entry(node, pod_uid, c, r, tuple(ids)) for (c, r), ids in sorted(entries.items())]
        if found == self._pods.get(pod_uid, []) or (not found and pod_uid not in self._pods):
            return
        if found:
            self._pods[pod_uid] = found
        else:
            del self._pods[pod_uid]
        self._save()

    def release(self, node: str, live_pods: Iterable[str]) -> list[str]:
        """Forget the pods of ``node`` not in ``live_pods`` (finished or deleted); returns their UIDs.

        Call it only with the complete list of the node's live pods (after the pod watch has synced): a pod
        missing from a partial list would lose its devices to the next pod."""
        live = set(live_pods)
        gone = [uid for uid, entries in self._pods.items() if uid not in live and entries and entries[0].node == node]
        for uid in gone:
            del self._pods[uid]
        if gone:
            self._save()
        return gone

    def _save(self) -> None:
        if self.path is None:
            return
        entries = [{"Node": e.node, "PodUID": e.pod_uid, "ContainerName": e.container, "ResourceName": e.resource,
                    "DeviceIDs": list(e.device_ids)} for uid in sorted(self._pods) for e in self._pods[uid]]
        data = {"PodDeviceEntries": entries}
        body = json.dumps({"Data": data, "Checksum": _checksum(data)}, indent=1, sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)


def _checksum(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _read(path: Path) -> dict[str, list[Entry]]:
    """The entries on disk; a missing file is an empty record, a damaged one is logged and ignored (as the kubelet
    does: "Continue after failing to read checkpoint file. Device allocation info may NOT be up-to-date")."""
    try:
        raw = json.loads(path.read_text())
        data = raw["Data"]
        if raw.get("Checksum") != _checksum(data):
            raise ValueError("checksum mismatch")
        out: dict[str, list[Entry]] = {}
        for e in data["PodDeviceEntries"]:
            entry = Entry(str(e["Node"]), str(e["PodUID"]), str(e["ContainerName"]), str(e["ResourceName"]),
                          tuple(str(d) for d in e["DeviceIDs"]))
            out.setdefault(entry.pod_uid, []).append(entry)
        return out
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("device checkpoint %s cannot be read (%s); device allocation info may not be up to date",
                    path, exc)
        return {}
