"""The device plugin and GFD on one node: which config they load, and what the node then shows.

Config selection is the config-manager's (``DP cmd/config-manager``) with the operator's ``empty`` fallback;
parsing and advertising are ``cluster.gpu``'s. A running plugin keeps the file it loaded until it restarts or
the config-manager switches keys (``Loaded``). What reaches the node follows the kubelet: a running plugin's
resources replace the old ones; a plugin that stopped (crash, driver fault, MIG pause) leaves its resources in
capacity with allocatable 0, as the kubelet marks a vanished plugin's devices unhealthy. Plain data.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

from cluster.gpu import advertise as advertise_mod, device_plugin_config as dpc, inventory
from cluster.sim.gpu import names, policy as policy_mod

RUNNING, DOWN, ABSENT = "running", "down", "absent"
_NOT_GFD = frozenset({names.GPU_PRESENT, names.MIG_CONFIG_STATE, *names.USER_LABELS})


@dataclass(frozen=True)
class ConfigChoice:
    """The config the plugin (and GFD) run with on one node, or why they cannot start."""

    key: str | None = None  # ConfigMap key; None = the empty config
    config: dpc.DevicePluginConfig | None = None
    crash: str | None = None  # the plugin's crash line (bad file)
    sidecar_error: str | None = None  # config-manager failed; the plugin keeps ``key`` (its previous config)
    init_error: str | None = None  # config-manager failed before any config was linked: the pod never starts
    missing_configmap: str | None = None  # the ConfigMap the policy names does not exist

    @property
    def usable(self) -> bool:
        return self.config is not None


@dataclass(frozen=True)
class Loaded:
    """The config a running plugin (or GFD) read when it last (re)started: kept until it restarts.

    Neither the config-manager sidecar nor the plugin watches the file, and the operator does not watch the
    ConfigMap's contents (``DP cmd/config-manager/main.go``, reference section 9): an edited ConfigMap reaches a
    node only when its pod is replaced (``pod`` changes: rollout restart, MIG reconfiguration), when the
    config-manager switches to another key, or when the policy's ``devicePlugin.config`` changes (``ref``; the
    operator then rolls the DaemonSet).
    """

    pod: str  # uid of the pod that loaded it ("" when no pod was seen yet)
    key: str | None  # None = the empty config
    text: str | None
    ref: str  # the policy's config name and default at load time

    def annotation(self) -> str:
        return json.dumps({"pod": self.pod, "key": self.key, "text": self.text, "ref": self.ref}, sort_keys=True)

    @classmethod
    def from_annotation(cls, raw: str | None) -> Loaded | None:
        return _loaded_from(raw)


@functools.lru_cache(maxsize=4096)
def _loaded_from(raw: str | None) -> Loaded | None:
    """Parsed once per distinct annotation: a node's stays the same from one reconcile to the next."""
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    key, text = data.get("key"), data.get("text")
    return Loaded(str(data.get("pod", "")), key if isinstance(key, str) else None,
                  text if isinstance(text, str) else None, str(data.get("ref", "")))


def choose_config(pol: policy_mod.Policy, node_labels: Mapping[str, str],
                  configmaps: Mapping[str, Mapping[str, str]], loaded: Loaded | None,
                  pod_uid: str | None) -> tuple[ConfigChoice, Loaded | None]:
    """The config one node's plugin runs with, and what it has loaded (``None``: it has loaded nothing).

    ``loaded`` is what the node's plugin read before; ``pod_uid`` its pod now (``None`` when none is seen).
    """
    ref = f"{pol.device_plugin_config}/{pol.device_plugin_default}"
    fresh = loaded is None or loaded.ref != ref or (pod_uid is not None and loaded.pod != pod_uid)
    kept = None if fresh or loaded is None else _load(loaded.key, loaded.text, pol)
    if kept is not None and kept.crash:
        kept = None  # a crash-looping container starts again and reads the file as it is now
    if not pol.device_plugin_config:
        return _load(None, None, pol), Loaded(pod_uid or "", None, None, ref)
    data = configmaps.get(pol.device_plugin_config)
    if data is None:
        if kept is not None and loaded is not None:
            return kept, loaded  # a running pod keeps the files it mounted
        return ConfigChoice(missing_configmap=pol.device_plugin_config), None
    selection = dpc.select_config(data, node_labels.get(names.DEVICE_PLUGIN_CONFIG) or None,
                                  pol.device_plugin_default or None, ("empty",))
    if selection.error is not None:
        if kept is None or loaded is None:
            return ConfigChoice(init_error=selection.error), None
        return replace(kept, sidecar_error=selection.error), loaded
    if kept is not None and loaded is not None and selection.name == loaded.key:
        return kept, loaded  # the config-manager's "Already configured. Skipping update..."
    text = data.get(selection.name) if selection.name else None
    pod = pod_uid if pod_uid is not None else (loaded.pod if loaded is not None else "")
    return _load(selection.name, text, pol), Loaded(pod, selection.name, text, ref)


def _load(key: str | None, text: str | None, pol: policy_mod.Policy) -> ConfigChoice:
    return _load_cached(key, text, pol.mig_strategy, pol.mps_root)


@functools.lru_cache(maxsize=64)
def _load_cached(key: str | None, text: str | None, mig_strategy: str, mps_root: str) -> ConfigChoice:
    """Parse once per (key, text, env): every node with the same config reads the same file."""
    try:
        config = dpc.load(text, source=key or "config.yaml", env_mig_strategy=mig_strategy or None,
                          env_mps_root=mps_root or None)
    except dpc.PluginConfigError as exc:
        return ConfigChoice(key=key, crash=exc.crash_message)
    return ConfigChoice(key=key, config=config)


def advertisement(inv: inventory.NodeInventory, choice: ConfigChoice) -> advertise_mod.Advertisement | None:
    if choice.config is None:
        return None
    return _advertise(inv, choice.config)


@functools.lru_cache(maxsize=8192)
def _advertise(inv: inventory.NodeInventory, config: dpc.DevicePluginConfig) -> advertise_mod.Advertisement:
    """Cached per (inventory, config): the reconcile that follows the stack's own patch asks the same question."""
    return advertise_mod.advertise(inv, config, config.flags.mig_strategy)


def is_extended(resource: str) -> bool:
    return resource.startswith("nvidia.com/")


def resources(state: str, current_capacity: Mapping[str, str], adv: advertise_mod.Advertisement | None,
              gate_open: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The node's ``nvidia.com/*`` capacity and allocatable for a plugin that is running, down or absent.

    ``gate_open`` is the validator gate: until the driver and toolkit validations pass and the plugin has
    registered, allocatable stays 0.
    """
    if state == RUNNING and adv is not None and adv.error is None:
        cap = {k: str(v) for k, v in adv.capacity.items()}
        alloc = {k: str(v if gate_open else 0) for k, v in adv.allocatable.items()}
        return cap, alloc
    if state == DOWN:
        cap = {k: v for k, v in current_capacity.items() if is_extended(k)}
        return cap, {k: "0" for k in cap}
    return {}, {}


def is_gfd_label(key: str) -> bool:
    return key.startswith("nvidia.com/") and key not in _NOT_GFD and not key.startswith(names.DEPLOY_PREFIX)


def gfd_labels(state: str, current: Mapping[str, str], adv: advertise_mod.Advertisement | None,
               timestamp: str) -> dict[str, str]:
    """GFD's labels: fresh when it runs, unchanged while it is down, none when it is not deployed."""
    old = {k: v for k, v in current.items() if is_gfd_label(k)}
    if state == RUNNING and adv is not None and adv.gfd_error is None:
        fresh = dict(adv.labels)
        same = {k: v for k, v in old.items() if k != names.GFD_TIMESTAMP} == fresh
        fresh[names.GFD_TIMESTAMP] = old.get(names.GFD_TIMESTAMP, timestamp) if same else timestamp
        return fresh
    if state == ABSENT:
        return {}
    return old
