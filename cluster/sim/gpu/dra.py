"""The simulated ``gpu.nvidia.com`` DRA driver: ResourceSlices and DeviceClasses (reference section 7).

One slice per node, pool = node name. Full GPUs are ``gpu-<minor>``; a MIG-enabled GPU publishes its MIG
devices instead, named ``gpu-<minor>-mig-<profile without dots>-<giProfileId>-<placementStart>``. Attribute and
capacity names are the real driver's (``DRA cmd/gpu-kubelet-plugin/deviceinfo.go``, ``mig.go``). Unhealthy
GPUs are left out, as the driver's health check withdraws them. Plain data.
"""

from __future__ import annotations

from typing import Any

from cluster.gpu import catalog, inventory
from cluster.sim.gpu import names

API = "resource.k8s.io/v1"
SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"
CLASSES_PATH = "/apis/resource.k8s.io/v1/deviceclasses"
MIB = 1024 * 1024


def slice_prefix(node: str) -> str:
    """The ``generateName`` of a node's slice: the API server appends a random suffix, as for the slices the
    kubelet plugin's ResourceSlice controller creates (owner name, driver name;
    ``k8s.io/dynamic-resource-allocation/resourceslice/resourceslicecontroller.go``)."""
    return f"{node}-{names.DRA_DRIVER}-"


def _version(text: str) -> str:
    """A driver version as semver: ``580.95.05`` -> ``580.95.5`` (semver forbids leading zeros)."""
    parts = [str(int(p)) for p in text.split(".") if p.isdigit()]
    return ".".join((parts + ["0", "0", "0"])[:3])


def _common(inv: inventory.NodeInventory, model: catalog.GpuModel) -> dict[str, dict[str, Any]]:
    major, minor = model.compute_capability
    return {
        "productName": {"string": model.nvml_name},
        "brand": {"string": model.brand},
        "architecture": {"string": model.architecture},
        "cudaComputeCapability": {"version": f"{major}.{minor}.0"},
        "driverVersion": {"version": _version(inv.driver_version)},
        "cudaDriverVersion": {"version": f"{inv.cuda_driver_version[0]}.{inv.cuda_driver_version[1]}.0"},
    }


def mig_device_name(gpu: inventory.GpuInfo, m: inventory.MigDevice) -> str:
    profile = gpu.model.profile(m.profile)
    profile_id = profile.profile_id if profile else 0
    short = m.profile.replace(".", "").replace("+", "")
    return f"gpu-{gpu.index}-mig-{short}-{profile_id}-{m.placement_start}"


def _gpu_device(inv: inventory.NodeInventory, g: inventory.GpuInfo) -> dict[str, Any]:
    attrs = {"type": {"string": "gpu"}, "uuid": {"string": g.uuid}, **_common(inv, g.model),
             "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + g.index * 0x10:02x}:00.0"}}
    return {"name": f"gpu-{g.index}", "attributes": attrs,
            "capacity": {"memory": {"value": f"{g.model.memory_mib}Mi"}}}


def _mig_device(inv: inventory.NodeInventory, g: inventory.GpuInfo, m: inventory.MigDevice) -> dict[str, Any]:
    attrs = {"type": {"string": "mig"}, "uuid": {"string": m.uuid}, "parentUUID": {"string": g.uuid},
             "profile": {"string": m.profile}, **_common(inv, g.model)}
    cap: dict[str, dict[str, str]] = {
        "multiprocessors": {"value": str(m.multiprocessors)},
        "copyEngines": {"value": str(m.engines.copy)},
        "decoders": {"value": str(m.engines.decoder)},
        "encoders": {"value": str(m.engines.encoder)},
        "jpegEngines": {"value": str(m.engines.jpeg)},
        "ofaEngines": {"value": str(m.engines.ofa)},
        "memory": {"value": f"{m.memory_mib}Mi"},
    }
    for i in range(m.placement_start, m.placement_start + m.placement_size):
        cap[f"memorySlice{i}"] = {"value": "1"}
    return {"name": mig_device_name(g, m), "attributes": attrs, "capacity": cap}


def devices(inv: inventory.NodeInventory) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for g in inv.gpus:
        if not g.healthy:
            continue
        if g.mig_enabled:
            out.extend(_mig_device(inv, g, m) for m in g.mig_devices)
        else:
            out.append(_gpu_device(inv, g))
    return out


def uuids_by_device(inv: inventory.NodeInventory) -> dict[str, str]:
    """Device name -> the UUID a container sees (what the kubelet plugin's Prepare hands out)."""
    return {d["name"]: d["attributes"]["uuid"]["string"] for d in devices(inv)}


def resource_slice(node: str, node_uid: str, inv: inventory.NodeInventory, generation: int) -> dict[str, Any]:
    return {
        "apiVersion": API, "kind": "ResourceSlice",
        "metadata": {"generateName": slice_prefix(node), "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}]},
        "spec": {
            "driver": names.DRA_DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices(inv),
        },
    }


def device_classes() -> list[dict[str, Any]]:
    """The driver's DeviceClasses ``gpu.nvidia.com`` (type gpu) and ``mig.nvidia.com`` (type mig)."""
    out = []
    for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")):
        expr = f"device.driver == '{names.DRA_DRIVER}' && device.attributes['{names.DRA_DRIVER}'].type == '{kind}'"
        out.append({"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": expr}}]}})
    return out
