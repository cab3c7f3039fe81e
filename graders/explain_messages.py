"""Every sentence ``gpulab why`` says, in one place so it can be reviewed as prose.

Keys are ``<topic>/<variant>``; each entry names the course section to study and a text with ``{fields}``.
``say`` returns a ``Point`` (text + section). The explainer (``graders.explain``) chooses keys and fills in
facts; it never writes sentences itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from graders import messages


@dataclass(frozen=True)
class Point:
    """One statement for the learner and the course section that teaches it."""

    text: str
    section: str
    certain: bool = True

    @property
    def section_title(self) -> str:
        return messages.SECTION_TITLES[self.section]


class _Safe(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "?"


def say(key: str, /, **fields: object) -> Point:
    """The statement for ``key`` with ``fields`` filled in (a missing field shows as ``?``, never raises)."""
    section, text = CATALOG[key]
    return Point(text.format_map(_Safe(fields)), section)


_F, _O, _S, _SH, _D, _OP = "gpu-fundamentals", "gpu-operator", "scheduling", "sharing", "dra", "operations"
_MIG = "mig"

CATALOG: Mapping[str, tuple[str, str]] = MappingProxyType({
    # --- what state the pod is in ------------------------------------------------------------------------
    "state/unschedulable": (_S,
        "Pod {namespace}/{pod} is Pending: the scheduler found no node for it. Below, for each of the {total} "
        "nodes, is what stops the pod from running there."),
    "state/waiting": (_S,
        "Pod {namespace}/{pod} is Pending and the scheduler has not reported a failure (yet). Below is how "
        "each node looks for this pod right now."),
    "state/gated": (_S,
        "Pod {namespace}/{pod} waits on scheduling gates ({gates}); the scheduler ignores it until they are removed."),
    "state/starting": (_OP,
        "Pod {namespace}/{pod} was placed on node {node} (pool {pool}) and is still starting{detail}."),
    "state/running": (_S,
        "Pod {namespace}/{pod} runs on node {node} (pool {pool}); nothing is blocking it."),
    "state/succeeded": (_S,
        "Pod {namespace}/{pod} ran on node {node} and finished successfully."),
    "state/failed": (_OP,
        "Pod {namespace}/{pod} failed on node {node}: {reason}: {message}"),
    "state/not-found": (_F,
        "There is no pod {pod} in namespace {namespace}, and no refusal in that namespace mentions it. Check the "
        "name with `kubectl get pods -n {namespace}`."),
    # --- cross-check with the scheduler ---------------------------------------------------------------------
    "check/agrees": (_S,
        "This matches the scheduler's own count: {counts}."),
    "check/differs": (_S,
        "The scheduler counted {theirs}; looking at the nodes now gives {ours}. The cluster changed since the "
        "scheduler last tried (pods ended, GPUs appeared or labels moved); it will try again."),
    "check/prefilter": (_S,
        "The scheduler stopped before looking at single nodes: {message}"),
    "check/fits-now": (_S,
        "Node {node} looks able to take the pod now; the scheduler retries Pending pods and should place it soon."),
    "preempt/not-helpful": (_S,
        "Evicting lower-priority pods would not help either: what blocks the pod on these nodes is not other pods."),
    "preempt/no-victims": (_S,
        "No running pod has a lower priority than this one, so the scheduler could not make room by evicting "
        "(PriorityClass decides who may be evicted)."),
    # --- one reason of a FailedScheduling message, read without the nodes ---------------------------------
    "count/taints": (_S,
        "{count} node(s) carry a taint the pod does not tolerate (GPU nodes are usually tainted nvidia.com/gpu)."),
    "count/affinity": (_S,
        "{count} node(s) lack the labels the pod's nodeSelector or required node affinity asks for."),
    "count/unschedulable": (_OP,
        "{count} node(s) are cordoned and take no new pods."),
    "count/too-many-pods": (_OP,
        "{count} node(s) already run as many pods as they accept."),
    "count/insufficient-gpu": (_F,
        "{count} node(s) do not have enough free {resource}: none advertised, or all already held by other pods."),
    "count/insufficient": (_S,
        "{count} node(s) do not have enough free {resource} for the pod's requests."),
    "count/dra": (_D,
        "{count} node(s) cannot provide devices that satisfy the pod's ResourceClaims."),
    "count/dra-elsewhere": (_D,
        "{count} node(s) are ruled out because the pod's claim is already allocated on another node."),
    "count/other": (_S,
        "{count} node(s): “{reason}”."),
    # --- per-node reasons ------------------------------------------------------------------------------------
    "node/cordoned": (_OP,
        "The node is cordoned (`spec.unschedulable`), so it takes no new pods until `kubectl uncordon`."),
    "node/taint": (_S,
        "The node is tainted {taint} and the pod has no toleration for it. A GPU pod needs e.g. "
        "`tolerations: [{{key: {key}, operator: Exists, effect: {effect}}}]`."),
    "node/taint-near-miss": (_S,
        "The node is tainted {taint}; the pod's toleration ({near}) comes close but does not match. Key, effect "
        "and (for operator Equal) value must all match; `operator: Exists` ignores the value."),
    "node/selector": (_S,
        "The pod's nodeSelector asks for {key}={want}, but this node has {key}={found}."),
    "node/selector-gfd": (_O,
        "The pod's nodeSelector asks for {key}={want}, but this node has {key}={found}. GPU labels are written by "
        "GPU Feature Discovery; use a value that some node really carries (`kubectl get nodes -L {key}`)."),
    "node/selector-missing": (_S,
        "The pod's nodeSelector asks for {key}={want}, but this node has no {key} label."),
    "node/selector-missing-gfd": (_O,
        "The pod's nodeSelector asks for {key}={want}, but this node has no {key} label. GPU labels appear only "
        "once GPU Feature Discovery runs on a GPU node."),
    "node/affinity": (_S,
        "The node matches none of the pod's required node-affinity terms: {terms}."),
    "node/too-many-pods": (_OP,
        "The node already runs {pods} pods, the most it accepts ({max})."),
    "node/gpu-none": (_O,
        "The pod asks for {want} {resource}, and this node advertises none at all: no device plugin offers "
        "{resource} here (no GPU, the GPU Operator is not installed, or the node uses another resource name)."),
    "node/gpu-not-allocatable": (_OP,
        "The pod asks for {want} {resource}; the node has {capacity} in capacity but only {allocatable} allocatable. "
        "Devices that exist but are not allocatable mean the device plugin is down (crash-looping, waiting for the "
        "driver or container-toolkit validation, or paused by the MIG manager) or GPUs are unhealthy; a failing CUDA "
        "or plugin validation does not take GPUs away. See `gpulab gpu-operator status`."),
    "node/gpu-mig-failed": (_MIG,
        "The pod asks for {want} {resource}; the node has {allocatable}. Its MIG manager reports "
        "`nvidia.com/mig.config.state=failed` for `{mig_config}`: the layout was not (fully) applied. The reason is "
        "in `kubectl describe node` (a name not in the mig-parted file, a layout that does not fit, or a pod still "
        "using a GPU being changed: the MIG manager never evicts pods). Drain the node's GPU pods first, then "
        "relabel or restart the mig-manager pod."),
    "node/gpu-mig-pending": (_MIG,
        "The pod asks for {want} {resource}; the node has {allocatable}. Its MIG manager is repartitioning it "
        "(`nvidia.com/mig.config.state=pending` for `{mig_config}`), and the device plugin is paused until it is "
        "done."),
    "node/gpu-busy": (_F,
        "The pod asks for {want} {resource}; the node has {allocatable}, and pods already there hold {used}, "
        "leaving {free}. GPUs are whole devices: they are not shared unless the device plugin is told to."),
    "node/gpu-shared-busy": (_SH,
        "The pod asks for {want} {resource}; the node offers {allocatable} shared replicas and pods already hold "
        "{used}, leaving {free}."),
    "node/gpu-mig-busy": (_MIG,
        "The pod asks for {want} {resource}; the node has {allocatable} of these MIG devices and pods already hold "
        "{used}, leaving {free}. MIG devices exist only for the profiles in the node's current MIG layout."),
    "node/extended-busy": (_F,
        "The pod asks for {want} {resource}; the node has {allocatable} allocatable, {used} already in use, "
        "leaving {free}."),
    "node/native-busy": (_S,
        "The pod requests {want} {resource}; the node has {allocatable} allocatable and pods there request {used}, "
        "leaving {free}."),
    "node/dra-elsewhere": (_D,
        "The pod's claim {claim} is already allocated on node {node}, so the pod can only run there."),
    "node/dra-no-devices": (_D,
        "The node publishes no devices for Dynamic Resource Allocation (no ResourceSlice): it is served by the "
        "device plugin, or its DRA driver is not running."),
    "node/dra-all-taken": (_D,
        "All {total} devices this node publishes are already allocated to other claims."),
    "node/dra-no-match": (_D,
        "Of the node's {free} free devices ({offer}), none satisfies request {request} of claim {claim} "
        "(device class {class}, selectors {selectors}); it needs {need}."),
    "node/dra-unknown": (_D,
        "The node has {free} free devices ({offer}); the scheduler found none that satisfies request {request} of "
        "claim {claim}. gpulab cannot evaluate these selectors itself ({selectors}); compare them with the "
        "devices' attributes (`kubectl get resourceslices -o yaml`)."),
    "pod/dra-class-missing": (_D,
        "The pod's claim asks for device class {classes}, which does not exist (`kubectl get deviceclasses`)."),
    "pod/dra-waiting": (_D,
        "The scheduler is waiting for a ResourceClaim of the pod to exist: {message}"),
    # --- node-side and admission refusals -------------------------------------------------------------------
    "admit/devices-unavailable": (_OP,
        "The scheduler placed the pod on {node}, but when the node's kubelet asked the device plugin for {requested} "
        "{resource}, only {available} were free and healthy. The scheduler trusts the allocatable count; the "
        "device plugin knows which devices are really free (an unhealthy GPU, or devices still held)."),
    "admit/shared-limit": (_SH,
        "The node shares its GPUs with `failRequestsGreaterThanOne`, so each container may ask for at most 1 "
        "{resource}; this one asked for {requested}. One shared replica gives no more GPU than another."),
    "admit/out-of-resource": (_O,
        "When the kubelet on {node} admitted the pod, the node no longer had {resource} to give: the device plugin "
        "stopped advertising it after the pod was scheduled."),
    "exit/nonzero": (_OP,
        "Container {container} ended with exit code {code} ({reason}) on {node}: the node admitted the pod and the "
        "program itself failed. Its log says why: `kubectl logs -n {namespace} {pod} -c {container}` (add "
        "`--previous` once it has restarted). On a GPU shared by time-slicing, `CUDA error: out of memory` there "
        "means the pods on that GPU together asked for more memory than it has: time-slicing isolates no memory."),
    "admit/other": (_OP,
        "The node refused the pod ({reason}): {message}"),
    "quota/exceeded": (_S,
        "Creating the pod would exceed ResourceQuota {quota}: it asks for {requested}, the namespace already uses "
        "{used}, and the quota allows {limited}. Pods that are not finished count, including Pending ones."),
    "quota/must-specify": (_S,
        "ResourceQuota {quota} tracks {resources}, so every pod in the namespace must state them: {message}"),
    "quota/other": (_S,
        "A ResourceQuota refused the pod: {message}"),
    "quota/owner": (_S,
        "There is no pod {pod} in namespace {namespace}: {owner} tried to create it and the API server refused."),
})
