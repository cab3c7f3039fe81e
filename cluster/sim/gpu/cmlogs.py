"""What the device plugin's and GFD's ``config-manager`` sidecar logs when the node's config label changes, from
``DP cmd/config-manager/main.go`` (k8s-device-plugin v0.19.1: ``start``, ``updateConfig``, ``updateConfigName``;
the line numbers are that file's) with the operator's settings for the sidecar
(``OP assets/state-device-plugin/0500_daemonset.yaml``, ``assets/gpu-feature-discovery/0500_daemonset.yaml``:
``SEND_SIGNAL=true``, ``SIGNAL=1``, the operator's ``empty`` fallback). Plain data: the GPU stack writes the lines
to the sidecar's container log (``cluster.sim.kubelet.logstore``).
"""

from __future__ import annotations

from cluster.gpu import config_manager
from cluster.sim.gpu import faillogs, names
from cluster.sim.gpu.startlogs import CONFIG_MANAGER_MAIN, DEVICE_PLUGIN_CONFIG_LABEL, Line

CONTAINER = "config-manager"
SIGNALLED = {"device-plugin": "nvidia-device-plugin", "gpu-feature-discovery": "gpu-feature-discovery"}
FALLBACKS = ("empty",)


def _at(line: int) -> str:
    return CONFIG_MANAGER_MAIN + str(line)


def label_change(operand: str, label: str | None, default: str | None, selection: config_manager.Selection,
                 previous: str | None) -> tuple[Line, ...]:
    """The sidecar's lines for one turn of its loop: the label it saw, the config it chose (or the error it exits
    with), and the signal to the plugin when the config changed. ``previous``: the key the node ran before."""
    out = [Line("klog", f"Label change detected: {DEVICE_PLUGIN_CONFIG_LABEL}={label or ''}", _at(249))]
    if not label:
        if default:
            out.append(Line("klog", f"No value set. Selecting default name: {default}", _at(361)))
        else:
            out.append(Line("klog", "No value set and no default set. Attempting fallback strategies: "
                                    f"[{' '.join(FALLBACKS)}]", _at(369)))
            if selection.error is None:
                out.append(Line("klog", "Falling back to an empty configuration", _at(385)))
    if selection.error is not None:  # start() returns it; main() logs it and the container exits 1
        return (*out, *faillogs.exit_error(selection.error, _at(209)))
    name = selection.name
    out.append(Line("klog", f"Updating to config: {name}" if name else "Updating to empty config",
                    _at(305 if name else 303)))
    if (name or None) == (previous or None):
        out.append(Line("klog", "Already configured. Skipping update...", _at(313)))
    else:
        out.append(Line("klog", f"Successfully updated to config: {name}" if name else
                        "Successfully updated to empty config", _at(320 if name else 318)))
        out.append(Line("klog", f"Sending signal 'hangup' to '{SIGNALLED.get(operand, operand)}'", _at(324)))
        out.append(Line("klog", "Successfully sent signal", _at(329)))
    out.append(Line("klog", f"Waiting for change to '{DEVICE_PLUGIN_CONFIG_LABEL}' label", _at(247)))
    return tuple(out)


def label_of(labels: dict[str, str]) -> str | None:
    return labels.get(names.DEVICE_PLUGIN_CONFIG) or None
