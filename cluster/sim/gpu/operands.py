"""How each operand pod on a node looks: running, crash-looping with its error, or stuck in an init container.

The GPU Operator chains its operands through validations: the toolkit waits for the driver, the device plugin,
GFD and the DCGM exporter wait for the toolkit (``toolkit-validation`` init container), the validator runs
driver, toolkit, CUDA and plugin checks in turn. Nothing waits for the CUDA or plugin checks
(``OP assets/state-device-plugin/0500_daemonset.yaml``: the plugin's only init wait is ``toolkit-ready``), so a
failing CUDA or plugin validation stalls the validator pod alone. A fault therefore shows where a real cluster shows it: the
failing pod crash-loops and the pods after it wait in ``Init``; why it fails is in the failing container's log
(``faillogs``), not in its status: none of the operator's DaemonSets sets ``terminationMessagePolicy``, so the
kubelet reports no termination message (``pod_agent.termination_message``). The statuses built here are what
``kubectl get pods -n gpu-operator`` reads. Plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster.sim import nodes, pod_agent
from cluster.sim.gpu import faillogs, hoststate, names, plugin, startlogs

OK, CRASH, INIT_WAIT, INIT_CRASH, CREATING = "ok", "crash", "init-wait", "init-crash", "creating"

# Init containers of each operand pod (as the operator's DaemonSets declare them).
INIT_CONTAINERS: dict[str, tuple[str, ...]] = {
    "driver": ("k8s-driver-manager",),
    "container-toolkit": ("driver-validation",),
    "operator-validator": ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"),
    "device-plugin": ("toolkit-validation", "config-manager-init"),
    "gpu-feature-discovery": ("toolkit-validation", "config-manager-init"),
    "dcgm-exporter": ("toolkit-validation",),
    "mig-manager": ("toolkit-validation",),
    "dra-kubelet-plugin": ("init-container",),
}
SIDECARS: dict[str, tuple[str, ...]] = {"device-plugin": ("config-manager",), "gpu-feature-discovery": ("config-manager",)}

# What identifies each fault's failure (never shown: the failing container's log says what went wrong, in the
# upstream program's words, ``faillogs``).
DRIVER_MISSING, NOUVEAU, TOOLKIT = "driver-missing", "nouveau-bound", "toolkit-misconfigured"
CUDA, PLUGIN_VALIDATION = "cuda-validation-failing", "plugin-validation-failing"


@dataclass(frozen=True)
class OperandState:
    phase: str = OK
    container: str = ""  # the container that fails or waits
    # CREATING: the kubelet's FailedMount message. A failing container: what identifies its failure, for the stack
    # alone (a real kubelet shows no such text); its log lines are ``lines``.
    message: str = ""
    lines: tuple[startlogs.Line, ...] = ()  # what the failing container instance prints before it exits


def states(f: hoststate.Faults, choice: plugin.ConfigChoice | None, adv_error: str | None,
           gfd_error: str | None, gfd_choice: plugin.ConfigChoice | None = None) -> dict[str, OperandState]:
    """Every operand's state on a GPU node with faults ``f`` and the plugin config ``choice`` (GFD's own config
    ``gfd_choice``, the plugin's when not given: each has its config-manager)."""
    prereq: OperandState | None = None
    if not f.driver_ok:
        prereq = OperandState(INIT_WAIT, "toolkit-validation", "waiting for the driver")
    elif not f.toolkit_ok:
        prereq = OperandState(INIT_WAIT, "toolkit-validation", "waiting for the container toolkit")
    out = {
        "driver": _driver(f),
        "container-toolkit": (OperandState(INIT_WAIT, "driver-validation", "waiting for the driver") if not f.driver_ok
                              else OperandState(CRASH, "nvidia-container-toolkit-ctr", TOOLKIT,
                                                faillogs.toolkit_no_containerd_socket()) if not f.toolkit_ok
                              else OperandState()),
        "operator-validator": _validator(f),
        "device-plugin": prereq or _plugin(choice, adv_error, "nvidia-device-plugin"),
        "gpu-feature-discovery": prereq or _plugin(gfd_choice if gfd_choice is not None else choice, gfd_error,
                                                   "gpu-feature-discovery"),
        "dcgm-exporter": prereq or OperandState(),
        "mig-manager": prereq or OperandState(),
        "dra-kubelet-plugin": prereq or OperandState(),
    }
    return out


def _driver(f: hoststate.Faults) -> OperandState:
    if "nouveau-bound" in f.kinds:
        return OperandState(CRASH, "nvidia-driver-ctr", NOUVEAU, faillogs.nouveau_bound())
    if "driver-missing" in f.kinds:
        return OperandState(CRASH, "nvidia-driver-ctr", DRIVER_MISSING, faillogs.driver_missing(nodes.KERNEL_VERSION))
    return OperandState()


def _validator(f: hoststate.Faults) -> OperandState:
    if not f.driver_ok:
        return OperandState(INIT_WAIT, "driver-validation", "waiting for the driver")
    if not f.toolkit_ok:
        return OperandState(INIT_WAIT, "toolkit-validation", "waiting for the container toolkit")
    if f.cuda_fails:  # its lines name the workload pod it created: the stack writes them (faillogs.cuda_validation)
        return OperandState(INIT_CRASH, "cuda-validation", CUDA)
    if f.plugin_validation_fails:
        return OperandState(INIT_CRASH, "plugin-validation", PLUGIN_VALIDATION, faillogs.plugin_validation())
    return OperandState()


def _plugin(choice: plugin.ConfigChoice | None, error: str | None, container: str) -> OperandState:
    if choice is None:
        return OperandState()
    if choice.missing_configmap:
        return OperandState(CREATING, container, f'MountVolume.SetUp failed for volume "config" : configmap '
                                                 f'"{choice.missing_configmap}" not found')
    if choice.init_error:
        return OperandState(INIT_CRASH, "config-manager-init", choice.init_error,
                            faillogs.exit_error(choice.init_error, startlogs.CONFIG_MANAGER_MAIN + "209"))
    main = startlogs.PLUGIN_MAIN + "188" if container == "nvidia-device-plugin" else startlogs.GFD_MAIN + "127"
    if choice.crash:
        return OperandState(CRASH, container, choice.crash, faillogs.exit_error(choice.crash, main))
    if error:
        return OperandState(CRASH, container, error, faillogs.exit_error(error, main))
    if choice.sidecar_error:  # the sidecar's turn, error included, is in its log already (cmlogs)
        return OperandState(CRASH, "config-manager", choice.sidecar_error)
    return OperandState()


# --- pod statuses ----------------------------------------------------------------------------------------


def _cstatus(pod: Mapping[str, Any], name: str, state: dict[str, Any], ready: bool, restarts: int,
             last: dict[str, Any] | None = None) -> dict[str, Any]:
    c = next((c for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", [])
              if c["name"] == name), {"name": name, "image": ""})
    return pod_agent.container_status(c, pod["metadata"]["uid"], state, ready, restarts, last)  # noqa: SLF001


def restarts_of(pod: Mapping[str, Any], name: str) -> int:
    for cs in pod.get("status", {}).get("containerStatuses", []) + pod.get("status", {}).get("initContainerStatuses", []):
        if cs.get("name") == name:
            return int(cs.get("restartCount", 0))
    return 0


def pod_status(pod: Mapping[str, Any], node: Mapping[str, Any] | None, st: OperandState,
               termination: str = "") -> dict[str, Any]:
    """The full ``status`` of an operand pod in state ``st`` (a running status when ``st`` is OK). ``termination``:
    the failed instance's termination message (the kubelet's, from its log and its spec's policy)."""
    base = pod_agent.running_status(dict(pod), dict(node) if node else None)
    base = {k: v for k, v in base.items() if v is not None}
    if st.phase == OK:
        for cs in base.get("containerStatuses", []):
            cs["restartCount"] = restarts_of(pod, cs["name"])
        return base
    ts = nodes.now()
    inits = [c["name"] for c in pod["spec"].get("initContainers", [])]
    mains = [c["name"] for c in pod["spec"].get("containers", [])]
    waiting = {"waiting": {"reason": "PodInitializing"}}
    if st.phase == CREATING and inits:
        # A volume that cannot mount stops the pod before its first init container: the kubelet reports every
        # container waiting with PodInitializing when the pod has init containers (ContainerCreating only when
        # it has none; kubelet pkg/kubelet/kubelet_pods.go convertToAPIContainerStatuses), so kubectl prints
        # Init:0/N, as for the operator's plugin pod (GPU Operator v26.7.0 assets/state-device-plugin).
        base["initContainerStatuses"] = [_cstatus(pod, name, waiting, False, 0) for name in inits]
        base["containerStatuses"] = [_cstatus(pod, n, waiting, False, 0) for n in mains]
        base["phase"] = "Pending"
    elif st.phase in (INIT_WAIT, INIT_CRASH) and st.container in inits:
        at = inits.index(st.container)
        init_states = []
        for i, name in enumerate(inits):
            if i < at:
                init_states.append(_cstatus(pod, name, {"terminated": {"exitCode": 0, "reason": "Completed",
                                                                       "startedAt": ts, "finishedAt": ts}}, True, 0))
            elif i == at:
                init_states.append(_failing(pod, name, st, ts, termination))
            else:
                init_states.append(_cstatus(pod, name, waiting, False, 0))
        base["initContainerStatuses"] = init_states
        base["containerStatuses"] = [_cstatus(pod, n, waiting, False, 0) for n in mains]
        base["phase"] = "Pending"
    else:
        statuses = []
        for name in mains:
            if st.phase == CREATING or name == failing_container(pod, st):
                statuses.append(_failing(pod, name, st, ts, termination))
            else:
                statuses.append(_cstatus(pod, name, {"running": {"startedAt": ts}}, True, restarts_of(pod, name)))
        base["containerStatuses"] = statuses
    base["conditions"] = _not_ready(base.get("conditions", []), st, inits)
    return base


def failing_container(pod: Mapping[str, Any], st: OperandState) -> str:
    """The container of ``pod`` that shows ``st``'s failure (the first main container when ``st`` names none of
    the pod's)."""
    spec = pod.get("spec", {})
    names_ = [c["name"] for c in spec.get("containers", []) + spec.get("initContainers", [])]
    if st.container in names_ or not spec.get("containers"):
        return st.container
    return str(spec["containers"][0]["name"])


def _failing(pod: Mapping[str, Any], name: str, st: OperandState, ts: str, termination: str) -> dict[str, Any]:
    if st.phase == INIT_WAIT:
        return _cstatus(pod, name, {"running": {"startedAt": ts}}, False, 0)
    if st.phase == CREATING:
        return _cstatus(pod, name, {"waiting": {"reason": "ContainerCreating"}}, False, 0)
    restarts = restarts_of(pod, name) + 1
    # The instance that just failed: `kubectl logs --previous` reads it by this ID.
    term: dict[str, Any] = {"exitCode": 1, "reason": "Error", "startedAt": ts, "finishedAt": ts,
                            "containerID": pod_agent.runtime_id(pod["metadata"]["uid"], name, restarts - 1)}
    if termination:
        term["message"] = termination
    waiting = {"waiting": {"reason": "CrashLoopBackOff",
                           "message": f"back-off 10s restarting failed container={name} pod={pod['metadata']['name']}"}}
    return _cstatus(pod, name, waiting, False, restarts, {"terminated": term})


def _not_ready(conds: list[dict[str, Any]], st: OperandState, inits: list[str]) -> list[dict[str, Any]]:
    out = []
    for c in conds:
        c = dict(c)
        if c["type"] in ("Ready", "ContainersReady"):
            c.update(status="False", reason="ContainersNotReady", message=f"containers with unready status: [{st.container}]")
        if c["type"] == "Initialized" and (st.phase in (INIT_WAIT, INIT_CRASH) or st.phase == CREATING and inits):
            waiting = " ".join(inits) if st.phase == CREATING else st.container
            c.update(status="False", reason="ContainersNotInitialized",
                     message=f"containers with incomplete status: [{waiting}]")
        out.append(c)
    return out


def matches(pod: Mapping[str, Any], st: OperandState) -> bool:
    """Whether the pod already shows ``st`` (so the stack does not re-patch it on every event)."""
    status = pod.get("status", {})
    if status.get("phase") not in ("Running", "Pending") or not status.get("containerStatuses"):
        return False
    all_cs = status.get("containerStatuses", []) + status.get("initContainerStatuses", [])
    if st.phase == OK:
        return status.get("phase") == "Running" and all(cs.get("ready") for cs in status.get("containerStatuses", []))
    cs = next((c for c in all_cs if c.get("name") == st.container), None)
    if cs is None:
        return False
    if st.phase == INIT_WAIT:
        return "running" in cs.get("state", {}) and not cs.get("ready")
    if st.phase == CREATING:
        reason = "PodInitializing" if pod.get("spec", {}).get("initContainers") else "ContainerCreating"
        return all(c.get("state", {}).get("waiting", {}).get("reason") == reason for c in all_cs)
    # A crash loop: which failure it is lives in the container's log, not in its status (the stack remembers what
    # it wrote there, per container instance).
    return (cs.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
            and bool(cs.get("lastState", {}).get("terminated")))


def operand_of(pod: Mapping[str, Any]) -> str | None:
    """The operand (deploy-label suffix) an operator pod belongs to, from its ``app`` label."""
    app = (pod.get("metadata", {}).get("labels") or {}).get(names.OPERAND_LABEL, "")
    for operand, (ds, _) in names.OPERANDS.items():
        if app == ds:
            return operand
    return "dra-kubelet-plugin" if app == names.DRA_PLUGIN_DS else None
