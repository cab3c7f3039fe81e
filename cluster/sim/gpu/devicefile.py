"""What the device plugin registers with a real kubelet, as the file gpulab's node plugin reads on kind.

On ``local`` our node agent plays the kubelet, so the stack writes a node's ``nvidia.com/*`` capacity and
allocatable into its status itself. On kind the kubelets are real: the kubelet computes allocatable from capacity
at every node-status update (kubelet ``pkg/kubelet/nodestatus/setters.go``), so a second writer would fight it.
There, the stack writes each node's devices (IDs and health per resource name) into ``<dir>/<node>/devices.json``
on the host; kind mounts ``<dir>/<node>`` into that node, where ``kindplugin`` (``cluster/gosrc/kindplugin``)
registers them with the kubelet over the device-plugin API. The kubelet then counts every device in capacity and
the healthy ones in allocatable (``pkg/kubelet/cm/devicemanager`` ``GetCapacity``), as on a GPU node.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from cluster.gpu import advertise as advertise_mod

FILE_NAME = "devices.json"
# Where kind mounts a node's folder, and where the node plugin reads it (cluster/gosrc/kindplugin, --devices).
NODE_DIR = "/etc/gpulab/devices"

Devices = dict[str, list[tuple[str, bool]]]  # resource name -> [(device ID, healthy)]


def devices(capacity: Mapping[str, str], allocatable: Mapping[str, str],
            adv: advertise_mod.Advertisement | None) -> Devices:
    """The device list behind a node's wanted ``nvidia.com/*`` capacity and allocatable.

    Every device counts in capacity; the healthy ones in allocatable. IDs and health come from the plugin's
    advertisement where it matches (the IDs NVIDIA's plugin registers: GPU or MIG UUIDs, ``<id>::<i>`` for shared
    replicas); a plugin that is down or not validated yet reports the same devices, unhealthy.
    """
    out: Devices = {}
    for name, raw in sorted(capacity.items()):
        count, healthy = _int(raw), _int(allocatable.get(name, "0"))
        adv_devs = list(adv.devices.get(name, ())) if adv is not None else []
        if len(adv_devs) == count:
            ids = [d.id for d in adv_devs]
            flags = [d.healthy for d in adv_devs]
        else:
            ids = [f"{name.rsplit('/', 1)[-1]}-{i}" for i in range(count)]
            flags = [True] * count
        if sum(flags) != healthy:  # the validator gate, a plugin that is down: fewer healthy than advertised
            flags = [i < healthy for i in range(count)]
        out[name] = list(zip(ids, flags))
    return out


def _int(raw: str) -> int:
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


def render(devs: Devices, single_request: tuple[str, ...] = ()) -> str:
    """The file's text: ``{"resources": {name: [{"id", "healthy"}]}, "singleRequest": [names]}``."""
    data = {"resources": {name: [{"id": i, "healthy": h} for i, h in ds] for name, ds in sorted(devs.items())},
            "singleRequest": sorted(n for n in single_request if n in devs)}
    return json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n"


class Writer:
    """Writes each node's device file under ``root`` (atomically: the plugin never reads half a file)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._written: dict[str, str] = {}

    def path(self, node: str) -> Path:
        return self.root / node / FILE_NAME

    def write(self, node: str, text: str) -> bool:
        """Write ``text`` for ``node`` unless it is already there; whether it wrote."""
        if self._written.get(node) == text:
            return False
        target = self.path(node)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".devices-")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._written[node] = text
        return True
