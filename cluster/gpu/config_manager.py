"""The device plugin's config-manager: which ConfigMap key a node runs with (reference section 1).

``select_config`` mirrors ``updateConfigName`` of ``DP cmd/config-manager/main.go``: the node label
``nvidia.com/device-plugin.config``, then ``DEFAULT_CONFIG``, then the fallbacks. Plain data: it must not talk to
a cluster. ``cluster.gpu.device_plugin_config`` re-exports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

NAMED_FALLBACK = "default"


@dataclass(frozen=True)
class Selection:
    """The config-manager's choice: a ConfigMap key, ``None`` for the empty config, or an error.

    On an error the sidecar exits and the plugin keeps the config it had (``previous_kept``).
    """

    name: str | None = None
    error: str | None = None

    @property
    def previous_kept(self) -> bool:
        return self.error is not None


def select_config(
    data: Mapping[str, str],
    node_label: str | None,
    default: str | None,
    fallbacks: tuple[str, ...] = ("empty",),
) -> Selection:
    """``updateConfigName`` of ``DP cmd/config-manager/main.go``: label, then default, then each fallback.

    The operator's fallback is ``empty``; the Helm chart's is ``("named", "single")``.
    """
    names = sorted(k for k in data if not k.startswith(".."))
    if not names:
        return Selection(error="no configuration files available")
    if node_label:
        if node_label not in names:
            return Selection(error=f"specified config {node_label} does not exist")
        return Selection(name=node_label)
    if default:
        if default not in names:
            # The real code formats the (empty) label value here, not the default's name.
            return Selection(error="specified config  does not exist")
        return Selection(name=default)
    for fallback in fallbacks:
        if fallback == "named":
            if NAMED_FALLBACK in names:
                return Selection(name=NAMED_FALLBACK)
        elif fallback == "single":
            if len(names) == 1:
                return Selection(name=names[0])
        elif fallback == "empty":
            return Selection(name=None)
        else:
            return Selection(error=f"unknown fallback strategy: {fallback}")
    return Selection(error="no config was set, no default was provided, and all fallbacks failed")
