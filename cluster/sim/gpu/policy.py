"""The ClusterPolicy (``nvidia.com/v1``) as the simulated operator reads it: a frozen value with the defaults.

Defaults are the operator CRD's and Helm chart's (reference section 1 and 3): every operand enabled,
``mig.strategy: single`` from the chart, ``migManager.config.default: all-disabled`` and no
``migManager.config.name`` (the MIG manager then generates its layouts from the GPUs). Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


MIG_STRATEGIES = ("none", "single", "mixed")
DEFAULT_MIG_CONFIG_DEFAULT = "all-disabled"
DEFAULT_MPS_ROOT = "/run/nvidia/mps"


@dataclass(frozen=True)
class Policy:
    """What the operator acts on; ``mig_strategy`` is empty when the field is unset (the file then decides)."""

    device_plugin: bool = True
    device_plugin_config: str = ""  # ConfigMap name in the operator namespace; "" = no config (empty)
    device_plugin_default: str = ""
    mps_root: str = DEFAULT_MPS_ROOT  # the operator's MPS_ROOT env for the plugin (devicePlugin.mps.root)
    gfd: bool = True
    mig_manager: bool = True
    mig_config: str = ""  # ConfigMap name; "" = the MIG manager generates its config (mig-manager v0.14+)
    mig_config_default: str = DEFAULT_MIG_CONFIG_DEFAULT
    dcgm_exporter: bool = True
    driver: bool = True
    toolkit: bool = True
    mig_strategy: str = "single"

    def enabled(self, operand: str) -> bool:
        """Whether an operand (deploy-label suffix) is enabled in this policy. The validator always is: NVIDIA's
        ``ValidatorSpec`` has no ``enabled`` field, so the CRD prunes one (``OP api/nvidia/v1``)."""
        return {
            "device-plugin": self.device_plugin, "gpu-feature-discovery": self.gfd, "mig-manager": self.mig_manager,
            "dcgm-exporter": self.dcgm_exporter, "driver": self.driver,
            "container-toolkit": self.toolkit,
        }.get(operand, True)


def _enabled(spec: Mapping[str, Any], key: str) -> bool:
    value = spec.get(key) or {}
    return bool(value.get("enabled", True)) if isinstance(value, Mapping) else True


def _config(spec: Mapping[str, Any], key: str) -> tuple[str, str]:
    comp = spec.get(key) or {}
    cfg = comp.get("config") if isinstance(comp, Mapping) else None
    if not isinstance(cfg, Mapping):
        return "", ""
    return str(cfg.get("name") or ""), str(cfg.get("default") or "")


def from_object(obj: Mapping[str, Any] | None) -> Policy | None:
    """The policy of a ClusterPolicy object (``None`` when there is none)."""
    if obj is None:
        return None
    spec: Mapping[str, Any] = obj.get("spec") or {}
    dp_name, dp_default = _config(spec, "devicePlugin")
    mig_name, mig_default = _config(spec, "migManager")
    mig = spec.get("mig") or {}
    strategy = str(mig.get("strategy") or "") if isinstance(mig, Mapping) else ""
    dp = spec.get("devicePlugin") or {}
    mps = dp.get("mps") if isinstance(dp, Mapping) else None
    mps_root = str(mps.get("root", DEFAULT_MPS_ROOT) or "") if isinstance(mps, Mapping) else DEFAULT_MPS_ROOT
    return Policy(
        mps_root=mps_root,
        device_plugin=_enabled(spec, "devicePlugin"),
        device_plugin_config=dp_name,
        device_plugin_default=dp_default,
        gfd=_enabled(spec, "gfd"),
        mig_manager=_enabled(spec, "migManager"),
        mig_config=mig_name,
        mig_config_default=mig_default if mig_name or mig_default else DEFAULT_MIG_CONFIG_DEFAULT,
        dcgm_exporter=_enabled(spec, "dcgmExporter"),
        driver=_enabled(spec, "driver"),
        toolkit=_enabled(spec, "toolkit"),
        mig_strategy=strategy,
    )
