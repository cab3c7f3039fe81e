"""The one place where the control-plane versions are pinned.

Kubernetes v1.36.3 and etcd v3.6.8: the recipe in shared/reference recommends 1.36.3 (its staging v0.36.3
modules are served by the Go module proxy and kind v0.32.0's default node image is the same minor), and
etcd v3.6.8 is the client version Kubernetes 1.36 itself pins.
"""

from __future__ import annotations

KUBERNETES_VERSION = "v1.36.3"
STAGING_VERSION = "v0.36.3"
ETCD_VERSION = "v3.6.8"
GO_DIRECTIVE = "1.26.0"
KIND_VERSION = "v0.32.0"
KIND_NODE_IMAGE = "kindest/node:v1.36.1"

# Staging modules that k8s.io/kubernetes replaces with ./staging/src/k8s.io/<name>; the wrapper module pins each
# to the released STAGING_VERSION instead (list for 1.36, from k/k go.mod).
STAGING_MODULES = (
    "api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime", "client-go", "cloud-provider",
    "cluster-bootstrap", "code-generator", "component-base", "component-helpers", "controller-manager", "cri-api",
    "cri-client", "cri-streaming", "csi-translation-lib", "dynamic-resource-allocation", "endpointslice",
    "externaljwt", "kms", "kube-aggregator", "kube-controller-manager", "kube-proxy", "kube-scheduler", "kubectl",
    "kubelet", "metrics", "mount-utils", "pod-security-admission", "sample-apiserver", "sample-cli-plugin",
    "sample-controller", "streaming",
)

# NVIDIA's Go modules, used as referees (never at run time). The Go module proxy serves the GPU Operator only as
# pseudo-versions; the newest it serves is commit d73a0086a6ba (2025-09-17, the v25.3.4 release; `go list -m
# github.com/NVIDIA/gpu-operator@latest`; v26.x commits answer 403). Its tools/go.mod pins controller-tools
# v0.17.2, and controller-gen v0.17.2 over its api/nvidia/v1 gives byte for byte the CRD it ships in
# deployments/gpu-operator/crds. k8s-device-plugin v0.19.1 is the newest it serves (v0.20.0 answers 403).
# k8s-device-plugin's api/config/v1 decoder referees gpulab's (the dpcheck helper) and its cmd/gpu-feature-discovery
# recorded the GFD fixtures; the course teaches v0.20, whose differences are in docs/gpu-stack.md.
# mig-parted v0.15.0: the proxy serves its .info and .mod but not its .zip, so its code cannot be built here.
GPU_OPERATOR_MODULE = "github.com/NVIDIA/gpu-operator"
GPU_OPERATOR_VERSION = "v0.0.0-20250917190837-d73a0086a6ba"
GPU_OPERATOR_RELEASE = "v25.3.4"  # the release tag on that commit (`git describe`)
CONTROLLER_TOOLS_VERSION = "v0.17.2"
DEVICE_PLUGIN_MODULE = "github.com/NVIDIA/k8s-device-plugin"
DEVICE_PLUGIN_VERSION = "v0.19.1"
MIG_PARTED_MODULE = "github.com/NVIDIA/mig-parted"
MIG_PARTED_VERSION = "v0.15.0"

# The versions the course teaches (module 00, "The versions this course teaches"); the simulated stack follows
# them, and tests/unit/test_content_findings.py holds the notebook's table to these values.
TAUGHT_KUBERNETES = "1.36"
TAUGHT_GPU_OPERATOR = "v26.7.0"
TAUGHT_DEVICE_PLUGIN = "v0.20.0"  # what GPU Operator v26.7.0 deploys (deployments/gpu-operator/values.yaml)
TAUGHT_MIG_MANAGER = MIG_PARTED_VERSION  # v0.15.0, what GPU Operator v26.7.0 deploys
TAUGHT_DRA_DRIVER = "v25.12.0"  # NVIDIA/k8s-dra-driver-gpu's own chart
TAUGHT = (
    ("Kubernetes", TAUGHT_KUBERNETES), ("NVIDIA GPU Operator", TAUGHT_GPU_OPERATOR),
    ("NVIDIA device plugin and GPU Feature Discovery", TAUGHT_DEVICE_PLUGIN),
    ("MIG manager (mig-parted)", TAUGHT_MIG_MANAGER), ("NVIDIA DRA driver for GPUs", TAUGHT_DRA_DRIVER),
)

NVIDIA_PINS = (
    ("gpu-operator", f"{GPU_OPERATOR_VERSION} ({GPU_OPERATOR_RELEASE})"),
    ("controller-tools", CONTROLLER_TOOLS_VERSION),
    ("k8s-device-plugin", DEVICE_PLUGIN_VERSION),
    ("mig-parted", f"{MIG_PARTED_VERSION} (taught; its code is not served by the proxy, so no referee)"),
)

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
ALL_BINARIES = (*KUBE_BINARIES, "etcd")
