"""Every sentence a learner reads from live checks, evidence bundles and the server-side dry-run.

Keys are ``<check-id>/<variant>``; each entry holds the severity (for findings), the course section to read,
the message (what we saw) and the hint (what to do next). ``say`` fills in the fields and appends the section
to the hint, as ``graders.messages.say`` does for the static rules. Checks choose keys; they never build
sentences themselves. The explainer's wording lives in ``graders.explain_messages``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from graders import messages
from graders.messages import Msg, Said

E, W, I = messages.E, messages.W, messages.I
_F, _O, _S, _SH, _D, _OP = "gpu-fundamentals", "gpu-operator", "scheduling", "sharing", "dra", "operations"
_WHY = "Run `gpulab why {pod} -n {namespace}` for the reasons, node by node."


def say(key: str, /, **fields: object) -> Said:
    """The finished message and hint for ``key``; KeyError for an unknown key (a bug in a check)."""
    msg = CATALOG[key]
    title = messages.SECTION_TITLES[msg.section]
    hint = msg.hint.format(**fields)
    return Said(rule=key.split("/", 1)[0], severity=msg.severity, section=msg.section,
                message=msg.text.format(**fields), hint=f"{hint} Read: “{title}” ({msg.section}).")


CATALOG: Mapping[str, Msg] = MappingProxyType({
    # --- waiting and scope --------------------------------------------------------------------------------
    "wait/timed-out": Msg(E, _OP,
        "Timed out after {wait} s waiting for {what}. Last seen: {last}",
        "Look at the object with `kubectl describe`; the lab may need more time or a different manifest."),
    "scope/missing": Msg(E, _OP,
        "The evidence bundle does not hold namespace `{namespace}`, so this check cannot be judged from it.",
        "Record the bundle again from the notebook (or `gpulab lab submit`) so that it includes `{namespace}`."),
    # --- nodes ---------------------------------------------------------------------------------------------
    "node/missing": Msg(E, _OP,
        "There is no node called `{node}` in the cluster.",
        "List the nodes with `kubectl get nodes` and check the name."),
    "node-resource/ok": Msg(I, _O,
        "Node `{node}` shows {field} `{resource}` = {value}, as expected ({expect}).",
        "Nothing to do."),
    "node-resource/wrong": Msg(E, _O,
        "Node `{node}` shows {field} `{resource}` = {value}; expected {expect}.",
        "GPU resources appear on a node only when the device plugin runs there and the node passed validation: "
        "check `gpulab gpu-operator status` and `kubectl describe node {node}`."),
    "node-resource/wrong-native": Msg(E, _F,
        "Node `{node}` shows {field} `{resource}` = {value}; expected {expect}.",
        "Compare `kubectl describe node {node}` with what the lab asks for."),
    "node-label/ok": Msg(I, _O,
        "Node `{node}` has the label `{key}={value}`.",
        "Nothing to do."),
    "node-label/missing": Msg(E, _O,
        "Node `{node}` has no label `{key}`.",
        "GPU labels come from GPU Feature Discovery and the GPU Operator; labels you own are set with "
        "`kubectl label node {node} {key}=...`."),
    "node-label/wrong": Msg(E, _O,
        "Node `{node}` has `{key}={value}`; expected `{expect}`.",
        "Set the label with `kubectl label node {node} {key}={expect} --overwrite`, or check what changes it."),
    # --- pods ------------------------------------------------------------------------------------------------
    "pod/missing": Msg(E, _F,
        "There is no pod `{pod}` in namespace `{namespace}`.",
        "Apply your manifest with `kubectl apply -n {namespace} -f ...` and check the pod's name."),
    "pod-phase/ok": Msg(I, _S,
        "Pod `{namespace}/{pod}` is {phase}.",
        "Nothing to do."),
    "pod-phase/wrong": Msg(E, _S,
        "Pod `{namespace}/{pod}` is {phase}{detail}; expected {expect}.",
        _WHY),
    "pod-node/ok": Msg(I, _S,
        "Pod `{namespace}/{pod}` runs on node `{node}` (pool `{pool}`).",
        "Nothing to do."),
    "pod-node/unscheduled": Msg(E, _S,
        "Pod `{namespace}/{pod}` has not been placed on a node yet; expected {expect}.",
        _WHY),
    "pod-node/wrong": Msg(E, _S,
        "Pod `{namespace}/{pod}` was placed on node `{node}` (pool `{pool}`); expected {expect}.",
        "Steer the pod with a nodeSelector or node affinity on the node's labels (GFD labels such as "
        "`nvidia.com/gpu.product`, or `gpulab.dev/pool`), and tolerate the taints of the nodes it may use."),
    # --- events and admission ----------------------------------------------------------------------------
    "sched-event/ok": Msg(I, _S,
        "The scheduler reported for `{namespace}/{pod}`: “{event}”",
        "Nothing to do."),
    "sched-event/none": Msg(E, _S,
        "The scheduler has reported no scheduling failure for `{namespace}/{pod}` ({state}).",
        "This check expects the pod to stay Pending for a reason the lab sets up; look at the pod with "
        "`kubectl describe pod {pod} -n {namespace}`."),
    "sched-event/other": Msg(E, _S,
        "The scheduler's latest message for `{namespace}/{pod}` does not mention {missing}: “{event}”",
        _WHY),
    "admission/ok": Msg(I, _OP,
        "The node refused pod `{namespace}/{pod}` with {reason}: “{detail}”",
        "Nothing to do."),
    "admission/not-failed": Msg(E, _OP,
        "Pod `{namespace}/{pod}` is {phase}{detail}; expected the node to refuse it with {expect}.",
        "Admission failures happen on the node after scheduling; check what the lab asks you to request."),
    "admission/other": Msg(E, _OP,
        "Pod `{namespace}/{pod}` failed with {reason}: “{detail}”; expected {expect}.",
        _WHY),
    # --- DRA claims --------------------------------------------------------------------------------------
    "claim/missing": Msg(E, _D,
        "There is no ResourceClaim {claim} in namespace `{namespace}`.",
        "Claims from a ResourceClaimTemplate are created per pod; check `spec.resourceClaims` in the pod and "
        "`kubectl get resourceclaims -n {namespace}`."),
    "claim/unallocated": Msg(E, _D,
        "ResourceClaim `{namespace}/{claim}` is not allocated yet.",
        "A claim is allocated when the scheduler places a pod that uses it; run `kubectl describe resourceclaim "
        "{claim} -n {namespace}` and check the pod's events."),
    "claim/ok": Msg(I, _D,
        "ResourceClaim `{namespace}/{claim}` got {devices} on node `{node}`.",
        "Nothing to do."),
    "claim/wrong": Msg(E, _D,
        "ResourceClaim `{namespace}/{claim}` got {devices} on node `{node}`; expected {expect}.",
        "Narrow the request with the DeviceClass or a CEL selector on the driver's attributes and capacity "
        "(`device.attributes['gpu.nvidia.com'].productName`, `device.capacity['gpu.nvidia.com'].memory`)."),
    # --- quota ---------------------------------------------------------------------------------------------
    "quota/missing": Msg(E, _S,
        "There is no ResourceQuota {quota} in namespace `{namespace}`.",
        "Create it with `kubectl apply -n {namespace} -f ...`; GPUs are limited with `requests.nvidia.com/gpu`."),
    "quota/no-resource": Msg(E, _S,
        "ResourceQuota `{namespace}/{quota}` does not track `{resource}` (it tracks: {tracked}).",
        "GPU quotas must use the `requests.` prefix: `requests.nvidia.com/gpu`. Other spellings are accepted "
        "but never enforced."),
    "quota/ok": Msg(I, _S,
        "ResourceQuota `{namespace}/{quota}`: `{resource}` used {used} of {hard}.",
        "Nothing to do."),
    "quota/not-in-force": Msg(E, _S,
        "ResourceQuota `{namespace}/{quota}`: `{resource}` hard limit {hard} is written but not yet in force (the "
        "limit enforced is still {enforced}).",
        "The controller manager's quota controller copies `spec.hard` into `status.hard` within moments; until "
        "then the API server refuses pods against the old limit. Look again with `kubectl describe quota {quota} "
        "-n {namespace}`."),
    "quota/wrong": Msg(E, _S,
        "ResourceQuota `{namespace}/{quota}`: `{resource}` used {used} of {hard}; expected {expect}.",
        "Usage counts the requests of pods that are not finished; check `kubectl describe quota {quota} -n "
        "{namespace}`."),
    # --- evidence bundles --------------------------------------------------------------------------------
    "bundle/unreadable": Msg(E, _OP,
        "The evidence bundle cannot be read: {problem}.",
        "Record it again with `gpulab lab submit` (or the notebook's submit cell) and hand in that file."),
    "bundle/too-large": Msg(E, _OP,
        "The evidence bundle is {size}, above the {limit} limit.",
        "Bundles hold only the lab's namespaces; record it again from a fresh lab with `gpulab lab submit`."),
    "bundle/not-json": Msg(E, _OP,
        "The evidence bundle is not valid JSON: {problem}.",
        "Hand in the file that `gpulab lab submit` wrote, unchanged."),
    "bundle/not-a-bundle": Msg(E, _OP,
        "This file is not a gpulab evidence bundle ({problem}).",
        "Hand in the file that `gpulab lab submit` wrote, unchanged."),
    "bundle/too-old": Msg(E, _OP,
        "The evidence bundle has format version {found}; this gpulab reads versions {oldest} to {newest}.",
        "Record the bundle again with this gpulab (`gpulab lab submit`)."),
    "bundle/too-new": Msg(E, _OP,
        "The evidence bundle has format version {found}, newer than this gpulab understands (up to {newest}).",
        "Grade it with a newer gpulab (`pip install -U gpulab`), or record it again with this one."),
    "bundle/invalid": Msg(E, _OP,
        "The evidence bundle is damaged: {problems}.",
        "Hand in the file that `gpulab lab submit` wrote, unchanged, or record it again."),
    # --- server-side dry-run -------------------------------------------------------------------------------
    "apiserver/rejected": Msg(E, _F,
        "The API server refused {what}: {text}",
        "This is the cluster's own verdict (`kubectl apply --dry-run=server` shows the same); fix the field it names."),
    "apiserver/rejected-quota": Msg(E, _S,
        "The API server refused {what}: {text}",
        "A ResourceQuota in this namespace would be exceeded; GPUs are counted by `requests.nvidia.com/gpu` of "
        "pods that are not finished."),
    "apiserver/rejected-integer": Msg(E, _F,
        "The API server refused {what}: {text}",
        "GPUs are whole devices in a request: use an integer. To share a GPU, use time-slicing, MPS or MIG."),
    "apiserver/rejected-dra": Msg(E, _D,
        "The API server refused {what}: {text}",
        "Compare the object with the `resource.k8s.io/v1` shape: requests use `exactly` (or `firstAvailable`) "
        "with a `deviceClassName`."),
    "apiserver/unknown-kind": Msg(W, _O,
        "The cluster does not serve kind `{kind}` in `{api_version}`, so {what} could not be checked.",
        "Kinds such as ClusterPolicy exist only once their CRD is installed (`gpulab gpu-operator install`); "
        "check the spelling of `apiVersion` and `kind`."),
    "apiserver/namespace-in-submission": Msg(I, _F,
        "{what} goes into namespace `{namespace}`, which this submission creates; the server could not check it "
        "before that namespace exists.",
        "Apply the Namespace first, then run the check again."),
})
