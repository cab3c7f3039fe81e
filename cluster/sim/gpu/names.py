"""Names shared by the operator install, the stack's controllers, the admission hook and the CLI.

Label and annotation keys that the real GPU Operator, device plugin, GFD and MIG manager use are spelled as
upstream spells them (reference sections 1-3). Keys under ``gpulab.dev/`` are the simulator's own records.
"""

from __future__ import annotations

NAMESPACE = "gpu-operator"
POLICY_NAME = "cluster-policy"
CRD_NAME = "clusterpolicies.nvidia.com"
POLICY_PATH = "/apis/nvidia.com/v1/clusterpolicies"  # the one spelling of the ClusterPolicy REST path
POLICY = f"{POLICY_PATH}/{POLICY_NAME}"  # the one ClusterPolicy the operator reads
APPS_PATH = f"/apis/apps/v1/namespaces/{NAMESPACE}"  # the operator's Deployment and DaemonSets
MIG_CONFIGMAP = "default-mig-parted-config"
MIG_CONFIG_KEY = "config.yaml"
DCGM_ENDPOINT_CONFIGMAP = "gpulab-dcgm-exporter"

# Labels (upstream contracts).
NFD_PCI = "feature.node.kubernetes.io/pci-10de.present"
GPU_PRESENT = "nvidia.com/gpu.present"
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
DEVICE_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
MIG_CAPABLE = "nvidia.com/mig.capable"
GFD_TIMESTAMP = "nvidia.com/gfd.timestamp"
PAUSED = "paused-for-mig-change"
# gpulab's per-node switch between the device plugin and the DRA driver (docs/gpu-stack.md, "Mode rules").
DRA_ENABLED = "nvidia.com/dra-driver.enabled"

# Labels a user or admin owns: the stack reads them and never removes them.
USER_LABELS = frozenset({DEVICE_PLUGIN_CONFIG, MIG_CONFIG, DRA_ENABLED})

# Annotations (gpulab's records; every process reads them from the node).
FAULTS = "gpulab.dev/gpu-faults"
MIG_LAYOUT = "gpulab.dev/mig-layout"
MIG_APPLIED = "gpulab.dev/mig-applied"
MIG_FAILURE = "gpulab.dev/mig-failure"
DEVICE_REGISTRY = "gpulab.dev/device-registry"
PLUGIN_CONFIG_APPLIED = "gpulab.dev/device-plugin-config-applied"
# What the node's running plugin and GFD loaded at their last start (key, file text, pod): kept until they restart.
PLUGIN_CONFIG_LOADED = "gpulab.dev/device-plugin-config-loaded"
GFD_CONFIG_LOADED = "gpulab.dev/gfd-config-loaded"
POD_DEVICES = "gpulab.dev/devices"
POD_ENV = "gpulab.dev/env"
POD_GPU_UTIL = "gpulab.dev/gpu-util"
POD_GPU_MEM = "gpulab.dev/gpu-mem-mib"

# Operands: deploy-label suffix -> DaemonSet name and its main container (as the operator names them).
OPERANDS: dict[str, tuple[str, str]] = {
    "driver": ("nvidia-driver-daemonset", "nvidia-driver-ctr"),
    "container-toolkit": ("nvidia-container-toolkit-daemonset", "nvidia-container-toolkit-ctr"),
    "operator-validator": ("nvidia-operator-validator", "nvidia-operator-validator"),
    "device-plugin": ("nvidia-device-plugin-daemonset", "nvidia-device-plugin"),
    "gpu-feature-discovery": ("gpu-feature-discovery", "gpu-feature-discovery"),
    "dcgm-exporter": ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter"),
    "mig-manager": ("nvidia-mig-manager", "nvidia-mig-manager"),
}
DRA_PLUGIN_DS = "nvidia-dra-driver-gpu-kubelet-plugin"
DRA_PLUGIN_CONTAINER = "gpus"
OPERATOR_DEPLOYMENT = "gpu-operator"
# What the MIG manager pauses while it repartitions (reference section 3: plugin, GFD, dcgm, dcgm-exporter, nvsm),
# plus, from mig-parted v0.15 / GPU Operator v26.7, ``client``: third-party DaemonSets that opt in by selecting
# ``nvidia.com/gpu.deploy.client=true`` (their pods hold GPU handles, so they must leave while the layout changes).
CLIENT = "client"
PAUSED_DURING_MIG = ("device-plugin", "gpu-feature-discovery", "dcgm", "dcgm-exporter", "nvsm", CLIENT)
OPERAND_LABEL = "app"  # pod label that names the operand DaemonSet, as the operator's pods carry it

DRA_DRIVER = "gpu.nvidia.com"
DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")
