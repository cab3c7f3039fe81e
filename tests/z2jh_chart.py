"""What the Zero to JupyterHub chart does with a values file, for the user pod only: merge the values over the
chart's defaults as Helm does, then set KubeSpawner's traits the way the chart's hub config does.

Transcribed from jupyterhub/zero-to-jupyterhub-k8s at commit 48ea50e34daddde55d76e30df6ecd47e4abd4d8e:
``jupyterhub/files/hub/jupyterhub_config.py`` (the ``singleuser.*`` trait table, image, image pull secrets,
scheduling, storage, extra volumes, cloud metadata block, cmd, ``hub.config`` pass-through) and ``z2jh.py``
(``get_config``, ``set_config_if_not_none``). What shapes the user pod is here, and the idle culler's service and
role (``cull.*``); not the hub's own pod, the proxy or other services.
The defaults are ``tests/fixtures/z2jh/chart-values.yaml``, the chart's values.yaml at that commit, verbatim; its
schema is ``tests/fixtures/z2jh/values.schema.yaml`` (the chart's values.schema.yaml, from which Helm's
values.schema.json is generated), verbatim from the same commit (BSD-3-Clause, Project Jupyter Contributors).

Not a reimplementation of the chart: KubeSpawner itself renders the pod from this configuration.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import yaml
from traitlets.config import Config

from cluster.gpu.helm_values import merge as helm_merge  # Helm's coalescing of a values file over the defaults

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "z2jh"
CHART_DEFAULTS = FIXTURES / "chart-values.yaml"
CHART_SCHEMA = FIXTURES / "values.schema.yaml"
RELEASE = "gpulab-class"

# jupyterhub_config.py: for trait, cfg_key in (...): set_config_if_not_none(c.KubeSpawner, trait, "singleuser." + key)
_TRAITS: tuple[tuple[str, str | None], ...] = (
    ("pod_name_template", None), ("start_timeout", None), ("image_pull_policy", "image.pullPolicy"),
    ("events_enabled", "events"), ("extra_labels", None), ("extra_annotations", None), ("uid", None),
    ("fs_gid", None), ("service_account", "serviceAccountName"), ("storage_extra_labels", "storage.extraLabels"),
    ("node_selector", None), ("node_affinity_required", "extraNodeAffinity.required"),
    ("node_affinity_preferred", "extraNodeAffinity.preferred"),
    ("pod_affinity_required", "extraPodAffinity.required"), ("pod_affinity_preferred", "extraPodAffinity.preferred"),
    ("pod_anti_affinity_required", "extraPodAntiAffinity.required"),
    ("pod_anti_affinity_preferred", "extraPodAntiAffinity.preferred"),
    ("lifecycle_hooks", None), ("init_containers", None), ("extra_containers", None),
    ("mem_limit", "memory.limit"), ("mem_guarantee", "memory.guarantee"), ("cpu_limit", "cpu.limit"),
    ("cpu_guarantee", "cpu.guarantee"), ("extra_resource_limits", "extraResource.limits"),
    ("extra_resource_guarantees", "extraResource.guarantees"), ("environment", "extraEnv"),
    ("profile_list", None), ("extra_pod_config", None),
)


def load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path}: expected a mapping at the top level"
    return data


def schema_problems(values: dict[str, Any]) -> list[str]:
    """What the chart's schema refuses in merged values (Helm validates the merged values before rendering)."""
    import jsonschema

    validator = jsonschema.Draft7Validator(load_yaml(CHART_SCHEMA))
    return sorted(f"{'.'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in validator.iter_errors(values))


def unknown_keys(values: dict[str, Any], defaults: dict[str, Any], prefix: str = "") -> list[str]:
    """Keys of ``values`` the chart does not define (the chart's values.schema.json refuses them), below the
    sections our defaults copy whole; ``hub.config`` is free-form (Configurable class names)."""
    found: list[str] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if path == "hub.config":
            continue
        if key not in defaults:
            found.append(path)
        elif isinstance(value, dict) and isinstance(defaults[key], dict) and defaults[key]:
            found += unknown_keys(value, defaults[key], path + ".")
    return found


def get_config(values: dict[str, Any], key: str, default: Any = None) -> Any:
    """z2jh.py's get_config: a dotted key into the merged values."""
    node: Any = values
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return copy.deepcopy(node)


def _camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)


def spawner_config(values: dict[str, Any], namespace: str) -> Config:
    """The KubeSpawner configuration that the chart's hub would load for these merged values."""
    c = Config()
    ks = c.KubeSpawner
    ks.common_labels = {"app.kubernetes.io/name": "jupyterhub", "app": "jupyterhub",
                        "app.kubernetes.io/instance": RELEASE, "release": RELEASE,
                        "app.kubernetes.io/managed-by": "kubespawner"}
    ks.namespace = namespace
    for trait, key in _TRAITS:
        value = get_config(values, "singleuser." + (key or _camel(trait)))
        if value is not None:
            ks[trait] = value
    image = get_config(values, "singleuser.image.name")
    if image:
        tag = get_config(values, "singleuser.image.tag")
        ks.image = f"{image}:{tag}" if tag else image
    ks.allow_privilege_escalation = get_config(values, "singleuser.allowPrivilegeEscalation")
    secrets = list(get_config(values, "imagePullSecrets", []) or [])
    secrets += get_config(values, "singleuser.image.pullSecrets", []) or []
    if secrets:
        ks.image_pull_secrets = secrets
    _scheduling(values, ks)
    _storage(values, ks)
    if get_config(values, "singleuser.cmd", _UNSET) is not _UNSET:
        c.Spawner.cmd = get_config(values, "singleuser.cmd")
    if get_config(values, "singleuser.defaultUrl") is not None:
        c.Spawner.default_url = get_config(values, "singleuser.defaultUrl")
    _cloud_metadata(values, ks)
    for section, cfg in (get_config(values, "hub.config", {}) or {}).items():
        c[section].update(cfg)
    return c


_UNSET = object()


def _scheduling(values: dict[str, Any], ks: Any) -> None:
    if get_config(values, "scheduling.userScheduler.enabled"):
        ks.scheduler_name = f"{RELEASE}-user-scheduler"
    if get_config(values, "scheduling.podPriority.enabled"):
        ks.priority_class_name = f"{RELEASE}-priority"
    purpose = get_config(values, "scheduling.userPods.nodeAffinity.matchNodePurpose")
    selector = {"matchExpressions": [{"key": "hub.jupyter.org/node-purpose", "operator": "In", "values": ["user"]}]}
    if purpose == "prefer":
        ks.node_affinity_preferred = [*ks.get("node_affinity_preferred", []), {"weight": 100, "preference": selector}]
    elif purpose == "require":
        ks.node_affinity_required = [*ks.get("node_affinity_required", []), selector]
    tolerations = (get_config(values, "scheduling.userPods.tolerations", []) or []) + \
        (get_config(values, "singleuser.extraTolerations", []) or [])
    if tolerations:
        ks.tolerations = tolerations


def _storage(values: dict[str, Any], ks: Any) -> None:
    volumes: dict[str, Any] = {}
    mounts: dict[str, Any] = {}
    kind = get_config(values, "singleuser.storage.type")
    if kind == "dynamic":
        if get_config(values, "singleuser.storage.dynamic.pvcNameTemplate"):
            ks.pvc_name_template = get_config(values, "singleuser.storage.dynamic.pvcNameTemplate")
        volume = get_config(values, "singleuser.storage.dynamic.volumeNameTemplate")
        ks.storage_pvc_ensure = True
        for trait, key in (("storage_class", "dynamic.storageClass"),
                           ("storage_access_modes", "dynamic.storageAccessModes"), ("storage_capacity", "capacity")):
            if get_config(values, "singleuser.storage." + key) is not None:
                ks[trait] = get_config(values, "singleuser.storage." + key)
        volumes = {volume: {"name": volume, "persistentVolumeClaim": {"claimName": "{pvc_name}"}}}
        mounts = {volume: {"mountPath": get_config(values, "singleuser.storage.homeMountPath"), "name": volume,
                           "subPath": get_config(values, "singleuser.storage.dynamic.subPath")}}
    elif kind == "static":
        claim = get_config(values, "singleuser.storage.static.pvcName")
        volumes = {"home": {"name": "home", "persistentVolumeClaim": {"claimName": claim}}}
        mounts = {"home": {"mountPath": get_config(values, "singleuser.storage.homeMountPath"), "name": "home",
                           "subPath": get_config(values, "singleuser.storage.static.subPath")}}
    extra_volumes = get_config(values, "singleuser.storage.extraVolumes") or {}
    if isinstance(extra_volumes, dict):
        volumes.update(extra_volumes)
    else:
        volumes.update({v["name"]: v for v in extra_volumes})
    extra_mounts = get_config(values, "singleuser.storage.extraVolumeMounts") or {}
    if isinstance(extra_mounts, dict):
        mounts.update(extra_mounts)
    else:
        mounts.update({f"{i}-{m['name']}": m for i, m in enumerate(extra_mounts)})
    ks.volumes = volumes
    ks.volume_mounts = mounts


def culler(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The chart's idle-culler service and its role (jupyterhub_config.py, ``if get_config("cull.enabled")``), or
    None when culling is off. The hub runs it as a managed service on the hub's own API port."""
    if not get_config(values, "cull.enabled", False):
        return None
    role: dict[str, Any] = {"name": "jupyterhub-idle-culler",
                            "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
                            "services": ["jupyterhub-idle-culler"]}
    cmd = ["python3", "-m", "jupyterhub_idle_culler", "--url=http://localhost:8081/hub/api"]
    for key, flag in (("timeout", "--timeout"), ("every", "--cull-every"), ("concurrency", "--concurrency")):
        if get_config(values, f"cull.{key}"):
            cmd.append(f"{flag}={get_config(values, f'cull.{key}')}")
    if get_config(values, "cull.users"):
        cmd.append("--cull-users")
        role["scopes"].append("admin:users")
    if not get_config(values, "cull.adminUsers"):
        cmd.append("--cull-admin-users=false")
    if get_config(values, "cull.removeNamedServers"):
        cmd.append("--remove-named-servers")
    if get_config(values, "cull.maxAge"):
        cmd.append(f"--max-age={get_config(values, 'cull.maxAge')}")
    return {"name": "jupyterhub-idle-culler", "command": cmd}, role


def hub_settings(values: dict[str, Any], namespace: str) -> dict[str, Any]:
    """What the class's hub image reads (course/class/hub_config.py, ``$GPULAB_HUB_SPAWNER_CONFIG``): the spawner
    configuration as plain JSON, with the culler's service and role under ``_services`` and ``_roles``, and the
    values' ``hub.extraConfig`` snippets under ``_extra_config`` (the hub runs them last, in key order, as the
    chart's hub config does)."""
    rendered: dict[str, Any] = json.loads(json.dumps(spawner_config(values, namespace)))
    found = culler(values)
    if found is not None:
        rendered["_services"] = {"culler": found[0]}
        rendered["_roles"] = [found[1]]
    extra = get_config(values, "hub.extraConfig", {}) or {}
    if extra:
        rendered["_extra_config"] = {str(key): str(code) for key, code in extra.items()}
    return rendered


def _cloud_metadata(values: dict[str, Any], ks: Any) -> None:
    """The chart's default: a privileged init container that blocks the cloud metadata server with iptables."""
    metadata = get_config(values, "singleuser.cloudMetadata", {}) or {}
    if metadata.get("blockWithIptables") is not True:
        return
    image = get_config(values, "singleuser.networkTools.image.name")
    tag = get_config(values, "singleuser.networkTools.image.tag")
    ks.init_containers = [*ks.get("init_containers", []), {
        "name": "block-cloud-metadata",
        "image": f"{image}:{tag}",
        "command": ["iptables", "--append", "OUTPUT", "--protocol", "tcp", "--destination", metadata["ip"],
                    "--destination-port", "80", "--jump", "DROP"],
        "securityContext": {"privileged": True, "runAsUser": 0, "capabilities": {"add": ["NET_ADMIN"]}},
        "resources": get_config(values, "singleuser.networkTools.resources") or {},
    }]
