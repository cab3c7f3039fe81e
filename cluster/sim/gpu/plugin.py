"""The device plugin and GFD on one node: which config they load, and what the node then shows.

Config selection is the config-manager's (``DP cmd/config-manager``) with the operator's ``empty`` fallback;
parsing and advertising are ``cluster.gpu``'s. What reaches the node follows the kubelet: a running plugin's
resources replace the old ones; a plugin that stopped (crash, driver fault, MIG pause) leaves its resources in
capacity with allocatable 0, as the kubelet marks a vanished plugin's devices unhealthy. Plain data.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

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


def choose_config(pol: policy_mod.Policy, node_labels: Mapping[str, str],
                  configmaps: Mapping[str, Mapping[str, str]], previous: str | None) -> ConfigChoice:
    """Pick and load the config for one node. ``previous`` is the key it last ran with ("" = empty config)."""
    if not pol.device_plugin_config:
        return _load(None, None, pol)
    data = configmaps.get(pol.device_plugin_config)
    if data is None:
        return ConfigChoice(missing_configmap=pol.device_plugin_config)
    selection = dpc.select_config(data, node_labels.get(names.DEVICE_PLUGIN_CONFIG) or None,
                                  pol.device_plugin_default or None, ("empty",))
    if selection.error is not None:
        if previous is None or (previous and previous not in data):
            return ConfigChoice(init_error=selection.error)
        kept = _load(previous or None, data.get(previous) if previous else None, pol)
        return ConfigChoice(kept.key, kept.config, kept.crash, sidecar_error=selection.error)
    return _load(selection.name, data.get(selection.name) if selection.name else None, pol)


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

    ``gate_open`` is the validator gate: until CUDA validation passes, allocatable stays 0.
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
