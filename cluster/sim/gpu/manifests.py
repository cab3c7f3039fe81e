"""The objects ``gpulab gpu-operator install`` creates: namespace, ClusterPolicy CRD and default policy, the
default mig-parted ConfigMap, the operand DaemonSets, the operator Deployment and the DRA DeviceClasses.

The CRD is NVIDIA's own, generated from ``OP api/nvidia/v1/clusterpolicy_types.go``; the other shapes follow the
GPU Operator's ``assets/state-*``: DaemonSets select
nodes by ``nvidia.com/gpu.deploy.<operand>=true`` and tolerate the ``nvidia.com/gpu`` taint, and, as there, no
container sets ``terminationMessagePolicy`` (the API server defaults it to ``File``: no termination message from
the log). The real
DaemonSet controller creates their pods; the pod agent runs them; the stack shows their failures. Plain data.
"""

from __future__ import annotations

from typing import Any

from cluster import versions
from cluster.gpu import catalog, clusterpolicy_crd, mig
from cluster.sim.gpu import faillogs, names, operands, policy as policy_mod

VERSION = versions.TAUGHT_GPU_OPERATOR
IMAGE = f"nvcr.io/nvidia/gpu-operator-sim:{VERSION}"


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": names.NAMESPACE}}


def crd() -> dict[str, Any]:
    """NVIDIA's ClusterPolicy CRD, generated from the GPU Operator's ``api/nvidia/v1`` types (``cluster.gpu.clusterpolicy_crd``)."""
    return clusterpolicy_crd.crd()


def cluster_policy() -> dict[str, Any]:
    """The Helm chart's default ClusterPolicy (``mig.strategy: single``, every operand enabled).

    ``migManager.config`` is ``{default: all-disabled}`` with no ``name``: the chart's ``values.yaml`` has
    ``name: ""`` since v24.6.0 and ``templates/clusterpolicy.yaml`` renders ``name`` only when set since v26.3.0
    (before, the CRD defaulted the empty name to default-mig-parted-config), so MIG manager v0.14+ generates its layouts from the node's GPUs (``cluster.sim.gpu.world``).

    The CRD requires ``operator`` (with ``defaultRuntime``), ``daemonsets``, ``driver``, ``toolkit``,
    ``devicePlugin``, ``dcgm``, ``dcgmExporter``, ``gfd`` and ``nodeStatusExporter``; the API server then
    fills in the CRD's defaults (``operator.runtimeClass: nvidia``, ...)."""
    on = {"enabled": True}
    return {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": names.POLICY_NAME},
        "spec": {
            "operator": {"defaultRuntime": "containerd"},
            "daemonsets": {"priorityClassName": "system-node-critical", "updateStrategy": "RollingUpdate"},
            "driver": dict(on), "toolkit": dict(on), "gfd": dict(on),
            "dcgm": dict(on), "dcgmExporter": dict(on), "nodeStatusExporter": {"enabled": False},
            "devicePlugin": {"enabled": True, "mps": {"root": policy_mod.DEFAULT_MPS_ROOT}},
            "mig": {"strategy": "single"},
            "migManager": {"enabled": True, "config": {"default": "all-disabled"}},
        },
    }


def mig_configmap() -> dict[str, Any]:
    text = mig.default_config_yaml(list(catalog.MODELS.values()))
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": names.MIG_CONFIGMAP, "namespace": names.NAMESPACE},
            "data": {names.MIG_CONFIG_KEY: text}}


# The main container's NVIDIA_* variables, as in the GPU Operator's assets (``assets/state-device-plugin``,
# ``state-container-toolkit``, ``state-driver``, 0500_daemonset.yaml): the plugin sees every GPU; the driver and
# the toolkit get nothing injected by the NVIDIA runtime (the driver container has the driver itself). They decide
# what ``kubectl exec … nvidia-smi`` finds there (``cluster.sim.kubelet.programs``).
OPERAND_ENV: dict[str, tuple[tuple[str, str], ...]] = {
    "device-plugin": (("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_DRIVER_CAPABILITIES", "all")),
    "container-toolkit": (("NVIDIA_VISIBLE_DEVICES", "void"),),
    "driver": (("NVIDIA_VISIBLE_DEVICES", "void"),),
}


def _container(name: str) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, "imagePullPolicy": "IfNotPresent"}


def _init_container(name: str) -> dict[str, Any]:
    # A real kubelet (the kind backend) runs init containers and starts the pod only once each has ended, as
    # NVIDIA's validators end once their check passes; the pod agent on local ignores the command.
    return {**_container(name), "command": ["sh", "-c", f"echo {name}: done"]}


def daemonset(operand: str) -> dict[str, Any]:
    if operand == "dra-kubelet-plugin":
        ds_name, main = names.DRA_PLUGIN_DS, names.DRA_PLUGIN_CONTAINER
        selector = {names.DRA_ENABLED: "true", names.GPU_PRESENT: "true"}
    else:
        ds_name, main = names.OPERANDS[operand]
        selector = {names.DEPLOY_PREFIX + operand: "true"}
    containers = [_container(main)] + [_container(s) for s in operands.SIDECARS.get(operand, ())]
    env = OPERAND_ENV.get(operand)
    if env:
        containers[0]["env"] = [{"name": k, "value": v} for k, v in env]
    affinity: dict[str, Any] = {}
    if operand == "device-plugin":  # gpulab's mode rule: DRA nodes get no device plugin (docs/gpu-stack.md)
        term = {"matchExpressions": [{"key": names.DRA_ENABLED, "operator": "NotIn", "values": ["true"]}]}
        affinity = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term]}}}}
    labels = {names.OPERAND_LABEL: ds_name, "app.kubernetes.io/part-of": "gpu-operator"}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": ds_name, "namespace": names.NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {names.OPERAND_LABEL: ds_name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": selector,
                    **affinity,
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "priorityClassName": "system-node-critical",
                    "initContainers": [_init_container(i) for i in operands.INIT_CONTAINERS.get(operand, ())],
                    "containers": containers,
                },
            },
        },
    }


def operator_deployment() -> dict[str, Any]:
    labels = {"app": names.OPERATOR_DEPLOYMENT, "app.kubernetes.io/component": "gpu-operator"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": names.OPERATOR_DEPLOYMENT, "namespace": names.NAMESPACE, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": names.OPERATOR_DEPLOYMENT}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"priorityClassName": "system-node-critical",
                                       "containers": [_container("gpu-operator")]}}},
    }


def operand_daemonsets() -> list[str]:
    """Operands that get a DaemonSet (deploy-label suffixes, plus the DRA kubelet plugin)."""
    return [*names.OPERANDS, "dra-kubelet-plugin"]


def cuda_workload_pod(node: str) -> dict[str, Any]:
    """The pod the validator's ``cuda-validation`` step creates on its node (``OP
    validator/manifests/cuda-workload-validation.yaml``, GPU Operator v26.7.0; ``cmd/nvidia-validator/main.go``
    ``runWorkload`` sets its namespace, node and the validator DaemonSet's tolerations): an init container that
    runs vectorAdd, then a container that says so. Its service account (``nvidia-operator-validator`` upstream)
    is left to the namespace's default, as gpulab creates no operand service accounts."""
    privileged = {"privileged": True}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": faillogs.CUDA_WORKLOAD_PREFIX, "namespace": names.NAMESPACE,
                     "labels": {"app": faillogs.CUDA_WORKLOAD_APP},
                     "annotations": {"nvidia.cdi.k8s.io/container.cuda-validation": "management.nvidia.com/gpu=all"}},
        "spec": {
            "nodeName": node, "restartPolicy": "OnFailure",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "initContainers": [{**_container(faillogs.CUDA_WORKLOAD_CONTAINER), "command": ["sh", "-c"],
                                "args": ["vectorAdd"], "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
                                "securityContext": privileged}],
            "containers": [{**_container("nvidia-cuda-validator"), "command": ["sh", "-c"],
                            "args": ["echo cuda workload validation is successful"],
                            "securityContext": {**privileged, "readOnlyRootFilesystem": True}}],
        },
    }
