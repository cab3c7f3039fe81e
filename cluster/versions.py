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

# NVIDIA's device-plugin module, whose api/config/v1 decoder referees gpulab's (the dpcheck helper). v0.19.1 is
# the newest the Go module proxy serves; the course teaches v0.20, whose differences are in docs/gpu-stack.md.
NVIDIA_DEVICE_PLUGIN_MODULE = "github.com/NVIDIA/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_VERSION = "v0.19.1"

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

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
ALL_BINARIES = (*KUBE_BINARIES, "etcd")
