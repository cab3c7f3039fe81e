"""What the GPU stack's containers print when they start: lines taken from the upstream programs' source.

Each entry is a line the real program logs, unchanged, in its own logger's format (klog's header, logrus' and
slog's ``key=value`` text, zap's JSON), from the source gpulab pins (``cluster.versions``): k8s-device-plugin v0.19.1
and the GPU Operator at v25.3.4 (d73a0086a6ba), read in the Go module cache, and the operand images that operator
release names in its Helm values (dcgm-exporter 4.3.1-4.4.0; the driver container's script at gpu-driver-container
06a208c); the container toolkit at v1.20.0, what GPU Operator v26.7.0 deploys. A line whose text depends on the host
(a version string, what a probe found) is left out rather than guessed, so a container's log starts with its first
line that would read the same on any node. Only start-up lines are here; what a component logs later (and why it
fails) belongs to the component's own simulation. The pod agent writes these when it starts a container
(``cluster.sim.kubelet.logstore``). Plain data and formatting.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.sim.gpu import names


@dataclass(frozen=True)
class Line:
    fmt: str  # "klog", "logrus", "slog-text", "zap-json" or "plain" (a shell's echo)
    text: str
    source: str = ""  # module@version/path[:line] of the upstream line, for klog's header and for review
    level: str = "info"
    logger: str = ""  # zap's logger name
    stream: str = "stderr"  # klog, logrus, slog and zap write to stderr by default; echo to stdout
    attrs: tuple[tuple[str, str], ...] = ()  # slog's attributes after the message


DP = "github.com/NVIDIA/k8s-device-plugin@v0.19.1/"
OP = "github.com/NVIDIA/gpu-operator@v0.0.0-20250917190837-d73a0086a6ba/"  # v25.3.4
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"  # the operator's NODE_LABEL for both config-managers

PLUGIN_MAIN = DP + "cmd/nvidia-device-plugin/main.go:"
GFD_MAIN = DP + "cmd/gpu-feature-discovery/main.go:"
CONFIG_MANAGER_MAIN = DP + "cmd/config-manager/main.go:"
PLUGIN_ENTRYPOINT = OP + "assets/state-device-plugin/0400_configmap.yaml"
VALIDATOR_DAEMONSET = OP + "assets/state-operator-validation/0500_daemonset.yaml"
MIG_MANAGER_ENTRYPOINT = OP + "assets/state-mig-manager/0420_configmap.yaml"
# The toolkit GPU Operator v26.7.0 deploys (its values.yaml: v1.20.0), whose image links nvidia-toolkit to
# nvidia-ctk-installer; its failures are in faillogs, from the same release.
TOOLKIT_MAIN = "github.com/NVIDIA/nvidia-container-toolkit@v1.20.0/cmd/nvidia-ctk-installer/main.go:"
DCGM_EXPORTER_APP = "github.com/NVIDIA/dcgm-exporter@4.3.1-4.4.0/pkg/cmd/app.go:"
DCGM_EXPORTER_VERSION = "4.3.1-4.4.0"  # its Makefile's -X main.BuildVersion=$(DCGM_VERSION)-$(VERSION), hack/VERSION
DRIVER_SCRIPT = "github.com/NVIDIA/gpu-driver-container@06a208c/ubuntu24.04/nvidia-driver"

LINES: dict[str, tuple[Line, ...]] = {
    # The operator runs it from assets/state-device-plugin/0400_configmap.yaml's entrypoint.sh (which first prints
    # the host-dependent driver-ready file), then cmd/nvidia-device-plugin/main.go: start() (its version line names
    # the build, so it is left out) and startPlugins(). The socket folder is the flag's default
    # (pluginapi.KubeletSocket's).
    "nvidia-device-plugin": (
        Line("plain", "Starting nvidia-device-plugin", PLUGIN_ENTRYPOINT, stream="stdout"),
        Line("klog", "Starting FS watcher for /var/lib/kubelet/device-plugins", PLUGIN_MAIN + "253"),
        Line("klog", "Starting OS watcher.", PLUGIN_MAIN + "260"),
        Line("klog", "Starting Plugins.", PLUGIN_MAIN + "275"),
        Line("klog", "Loading configuration.", PLUGIN_MAIN + "332"),
    ),
    # cmd/gpu-feature-discovery/main.go: start().
    "gpu-feature-discovery": (
        Line("klog", "Starting OS watcher.", GFD_MAIN + "163"),
        Line("klog", "Loading configuration.", GFD_MAIN + "168"),
    ),
    # cmd/config-manager/main.go: start(), with NODE_LABEL as assets/state-device-plugin/0500_daemonset.yaml sets it;
    # the init container runs it once (ONESHOT), the sidecar keeps watching: both start the same way.
    "config-manager": (
        Line("klog", f"Waiting for change to '{DEVICE_PLUGIN_CONFIG_LABEL}' label", CONFIG_MANAGER_MAIN + "247"),
    ),
    "config-manager-init": (
        Line("klog", f"Waiting for change to '{DEVICE_PLUGIN_CONFIG_LABEL}' label", CONFIG_MANAGER_MAIN + "247"),
    ),
    # cmd/gpu-operator/main.go (controller-runtime v0.20.3's zap, JSON; the Helm chart's --zap-time-encoding=epoch).
    "gpu-operator": (
        Line("zap-json", "starting manager", OP + "cmd/gpu-operator/main.go:204", logger="setup"),
    ),
    # The validator pod's main container is a shell that says so and sleeps.
    "nvidia-operator-validator": (
        Line("plain", "all validations are successful", VALIDATOR_DAEMONSET, stream="stdout"),
    ),
    # The nvidia-driver script's first words, at its top level (TARGETARCH amd64, as every simulated node is); then
    # `init` goes on with what it finds on the host.
    "nvidia-driver-ctr": (
        Line("plain", "DRIVER_ARCH is x86_64", DRIVER_SCRIPT, stream="stdout"),
    ),
    # assets/state-container-toolkit/0400_configmap.yaml's entrypoint.sh prints the host-dependent driver-ready file,
    # then execs nvidia-toolkit: main() names the CLI (c.Name, whatever argv[0] is), Before() logs the source root it
    # resolved (host-dependent, left out), Run() initializes.
    "nvidia-container-toolkit-ctr": (
        Line("logrus", "Starting nvidia-ctk-installer", TOOLKIT_MAIN + "74"),
        Line("logrus", "Initializing", TOOLKIT_MAIN + "341"),
    ),
    # The image's entrypoint runs dcgm-exporter (after a warning when it cannot set its capabilities, left out);
    # startDCGMExporter() logs with slog's text handler (--log-format's default).
    "nvidia-dcgm-exporter": (
        Line("slog-text", "Starting dcgm-exporter", DCGM_EXPORTER_APP + "402",
             attrs=(("Version", DCGM_EXPORTER_VERSION),)),
    ),
    # entrypoint.sh, after the driver-ready file it prints (whose values depend on the host): IS_HOST_DRIVER is
    # false where the operator's driver container installs the driver.
    "nvidia-mig-manager": (
        Line("plain", "WITH_SHUTDOWN_HOST_GPU_CLIENTS=false", MIG_MANAGER_ENTRYPOINT, stream="stdout"),
        Line("plain", "Starting nvidia-mig-manager", MIG_MANAGER_ENTRYPOINT, stream="stdout"),
    ),
}


_LOGRUS_BARE = re.compile(r"[A-Za-z0-9\-._/@^+]+")  # logrus' needsQuoting: anything else is quoted
_SLOG_BARE = re.compile(r"[^\s\"=]+")  # slog quotes an empty value, spaces, quotes, '=' (and non-printables)


def _quoted(text: str, bare: re.Pattern[str]) -> str:
    """Go's %q of ``text`` (JSON's escaping for the printable text these lines hold) unless ``bare`` allows it."""
    return text if bare.fullmatch(text) else json.dumps(text)


def _klog(line: Line, ns: int) -> str:
    """klog's header: severity, mmdd, time with microseconds, thread id (pid 1 in a container), file:line."""
    t = time.gmtime(ns // 1_000_000_000)
    micros = (ns // 1000) % 1_000_000
    return (f"{line.level[0].upper()}{time.strftime('%m%d %H:%M:%S', t)}.{micros:06d}       1 "
            f"{line.source.rsplit('/', 1)[-1]}] {line.text}")


def render(line: Line, ns: int) -> str:
    if line.fmt == "klog":
        return _klog(line, ns)
    if line.fmt == "logrus":  # TextFormatter without a terminal: RFC3339 time, values quoted only when needed
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns // 1_000_000_000))
        return f"time={_quoted(stamp, _LOGRUS_BARE)} level={line.level} msg={_quoted(line.text, _LOGRUS_BARE)}"
    if line.fmt == "slog-text":  # log/slog's TextHandler: time with milliseconds, level in capitals
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000))
        fields = [f"time={stamp}.{(ns // 1_000_000) % 1000:03d}Z", f"level={line.level.upper()}",
                  f"msg={_quoted(line.text, _SLOG_BARE)}", *(f"{k}={_quoted(v, _SLOG_BARE)}" for k, v in line.attrs)]
        return " ".join(fields)
    if line.fmt == "zap-json":
        record: dict[str, Any] = {"level": line.level, "ts": ns / 1e9}
        if line.logger:
            record["logger"] = line.logger
        record["msg"] = line.text
        return json.dumps(record, separators=(",", ":"))
    return line.text


def operator_container(pod: Mapping[str, Any], container: Mapping[str, Any]) -> str | None:
    """Which program of the table a container of the GPU stack runs, or None for any other container."""
    meta = pod.get("metadata", {})
    if meta.get("namespace") != names.NAMESPACE:
        return None
    name = str(container.get("name", ""))
    return name if name in LINES else None


def lines(pod: Mapping[str, Any], container: Mapping[str, Any]) -> Sequence[tuple[str, str]]:
    """(stream, text) of what the container prints first; nothing for a container that is not the GPU stack's."""
    program = operator_container(pod, container)
    if program is None:
        return []
    now = time.time_ns()
    return [(line.stream, render(line, now)) for line in LINES[program]]
