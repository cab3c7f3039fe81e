"""What the ``nvidia-mig-manager`` container logs while it applies a ``nvidia.com/mig.config`` value: the lines of
NVIDIA's own code, unchanged, for each outcome the simulator reaches.

A real cluster says why a MIG change failed in two places only: the node label ``nvidia.com/mig.config.state=failed``
and this log (no Event, no condition). The lines come from mig-parted at the commit the reference pins
(``MP`` @bd7160f4, v0.15.0+2, what GPU Operator v26.7 runs): ``cmd/nvidia-mig-manager/main.go`` (the loop:
``Updating to MIG config``, ``Error: ...``, ``Successfully updated``), ``pkg/mig/reconfigure/reconfigure.go``
(``Run`` and ``setState``, logrus to stderr) and the ``nvidia-mig-parted`` commands it runs with their output
on the pod's own stdout/stderr (``cmd/nvidia-mig-parted/main.go``: ``log.Fatal(util.Capitalize(err))``;
``apply``/``assert`` print their success on stdout). mig-parted runs ``apply`` with ``-d``; its debug lines, which
walk every GPU with its PCI device ID and NVML values, are left out, and so are the per-ordering errors of a
layout that does not fit (``iteratePermutationsUntilSuccess``), whose NVML profile IDs and error depend on the
driver. Plain data and formatting; the MIG runner writes the lines through the kubelet's log store.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cluster.gpu import inventory
from cluster.sim.gpu import names, startlogs

MP = "github.com/NVIDIA/mig-parted@bd7160f4/"
MANAGER_MAIN = MP + "cmd/nvidia-mig-manager/main.go"
RECONFIGURE = MP + "pkg/mig/reconfigure/reconfigure.go"
PARTED = MP + "cmd/nvidia-mig-parted/main.go"  # and apply/apply.go, assert/assert.go, pkg/mig/config/config.go
CONTAINER = "nvidia-mig-manager"
# ``getCurrentNodeLabels`` logs these deploy labels (then the state), in this order.
CURRENT_VALUES = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm", "client")
# go-nvml's GPU_INSTANCE_PROFILE_* / COMPUTE_INSTANCE_PROFILE_* (nvml.h): what ``WalkGpuInstances`` and
# ``WalkComputeInstances`` pass as IDs, keyed by (compute slices, memory slices, media extensions).
_GI_PROFILE = {(1, 1, False): 0, (1, 1, True): 7, (1, 2, False): 9, (2, 2, False): 1, (3, 4, False): 2,
               (4, 4, False): 3, (7, 8, False): 4}
_CI_PROFILE = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}


@dataclass(frozen=True)
class Refusal:
    """Where the driver refused an apply: the GPU, and the instance in use (None: a MIG-mode change)."""

    gpu: int
    busy: inventory.Placement | None = None
    instances: tuple[str, ...] = ()  # the profiles of the GPU's target layout (mig-parted tries their orderings)


def _info(text: str, source: str = RECONFIGURE) -> startlogs.Line:
    return startlogs.Line("logrus", text, source)


def _parted_fatal(error: str) -> startlogs.Line:
    return startlogs.Line("logrus", error[:1].upper() + error[1:], PARTED, level="fatal")


def _stdout(text: str) -> startlogs.Line:
    return startlogs.Line("plain", text, PARTED, stream="stdout")


def _waiting() -> startlogs.Line:
    return _info(f"Waiting for change to '{names.MIG_CONFIG}' label", MANAGER_MAIN)


def start(config: str, labels: Mapping[str, str]) -> tuple[startlogs.Line, ...]:
    """The loop takes the label up: ``Run`` reads the current labels and asserts the name is in the file."""
    current = [_info(f"Current value of '{names.DEPLOY_PREFIX + op}={labels.get(names.DEPLOY_PREFIX + op, '')}'")
               for op in CURRENT_VALUES]
    return (_info(f"Updating to MIG config: {config}", MANAGER_MAIN), *current,
            _info(f"Current value of '{names.MIG_CONFIG_STATE}={labels.get(names.MIG_CONFIG_STATE, '')}'"),
            _info("Asserting that the requested configuration is present in the configuration file"))


def _set_state(state: str, restart_clients: bool = True) -> tuple[startlogs.Line, ...]:
    restart = _info("Restarting any GPU clients previously shutdown in Kubernetes by reenabling their "
                    "component-specific nodeSelector labels")
    return (*((restart,) if restart_clients else ()),
            _info(f"Changing the '{names.MIG_CONFIG_STATE}' node label to '{state}'"))


def _failed(step: str) -> tuple[startlogs.Line, ...]:
    return (*_set_state("failed"),
            startlogs.Line("logrus", f"Error: failed to {step}: exit status 1", MANAGER_MAIN, level="error"),
            _waiting())


def invalid(reason: str) -> tuple[startlogs.Line, ...]:
    """``nvidia-mig-parted assert --valid-config`` refused the file or the name (``reason`` as mig-parted words it,
    without its ``error selecting MIG config`` wrapper for a missing name)."""
    error = reason if reason.startswith("error parsing config file") else f"error selecting MIG config: {reason}"
    return (_parted_fatal(error), *_failed("validate MIG configuration"))


def already_applied(config: str) -> tuple[startlogs.Line, ...]:
    return (_stdout("Selected MIG configuration is valid"),
            _info("Checking if the selected MIG config is currently applied or not"),
            _stdout("Selected MIG configuration currently applied"),
            _info("Selected MIG config is already applied"), *_set_state("success"),
            _info(f"Successfully updated to MIG config: {config}", MANAGER_MAIN), _waiting())


def pending(mode_applied: bool) -> tuple[startlogs.Line, ...]:
    """Not applied yet: the mode check, pausing the GPU clients, and the wait for the first of them."""
    not_applied = _parted_fatal("assertion failure: selected configuration not currently applied")
    mode = _stdout("Selected MIG mode settings from configuration currently applied") if mode_applied else not_applied
    return (_stdout("Selected MIG configuration is valid"),
            _info("Checking if the selected MIG config is currently applied or not"), not_applied,
            _info("Checking if the MIG mode setting in the selected config is currently applied or not"),
            _info("If the state is 'rebooting', we expect this to always return true"), mode,
            _info("Shutting down all GPU clients in Kubernetes by disabling their component-specific nodeSelector "
                  "labels"),
            _info("Waiting for the device-plugin to shutdown"))


def operands_gone() -> tuple[startlogs.Line, ...]:
    return (_info("Waiting for gpu-feature-discovery to shutdown"), _info("Waiting for dcgm-exporter to shutdown"),
            _info("Waiting for dcgm to shutdown"),
            _info(f"Waiting for any daemon set pods with nodeSelector key {names.DEPLOY_PREFIX}client to shutdown"),
            _info("Removing the cuda-validator pod"), _info("Removing the plugin-validator pod"))


def _orderings(profiles: Sequence[str]) -> int:
    """How many distinct orderings ``iteratePermutationsUntilSuccess`` tries (each fails and is logged)."""
    count = math.factorial(len(profiles))
    for n in Counter(profiles).values():
        count //= math.factorial(n)
    return max(count, 1)


def _destroy_error(refusal: Refusal, busy: inventory.Placement) -> str:
    g = int(busy.profile.split("g", 1)[0].split(".")[-1])
    gi = _GI_PROFILE.get((g, busy.size, "+me" in busy.profile), 0)
    return (f"error walking gpu instances for '{refusal.gpu}': error walking compute instances for '{gi}': "
            f"error destroying Compute instance for profile '({_CI_PROFILE.get(g, 0)}, 0)': In use by another client")


def applied(config: str, refusal: Refusal | None, fits: bool = True) -> tuple[startlogs.Line, ...]:
    """The apply itself: ``refusal`` is the driver refusing a busy GPU, ``fits`` False a layout NVML cannot create."""
    head = (_info("Applying the MIG mode change from the selected config to the node (and double checking it took "
                  "effect)"),
            _info("If the -r option was passed, the node will be automatically rebooted if this is not successful"))
    apply_config = _info("Applying the selected MIG config to the node")
    if refusal is not None and refusal.busy is None:
        # The mode-only apply fails; without -r the manager goes on to the full apply, which fails the same way.
        fatal = _parted_fatal("error applying MIG configuration with hooks: error setting MIG mode: "
                              "In use by another client")
        return (*head, fatal, apply_config, fatal, *_failed("apply MIG configuration"))
    mode_done = (_stdout("MIG configuration applied successfully"),
                 _stdout("Selected MIG mode settings from configuration currently applied"))
    orderings = _parted_fatal("error applying MIG configuration with hooks: error setting MIGConfig: error "
                              "attempting multiple config orderings: all orderings failed")
    if refusal is not None and refusal.busy is not None:
        leaf = startlogs.Line("logrus", "Error clearing MigConfig: " + _destroy_error(refusal, refusal.busy),
                              MP + "pkg/mig/config/config.go", level="error")
        tries = (leaf,) * _orderings(refusal.instances)
        cleared = startlogs.Line("logrus", f"Error clearing MIG config on GPU {refusal.gpu}, erroneous devices may "
                                 "persist", MP + "pkg/mig/config/config.go", level="error")
        return (*head, *mode_done, apply_config, *tries, cleared, orderings, *_failed("apply MIG configuration"))
    if not fits:
        return (*head, *mode_done, apply_config, orderings, *_failed("apply MIG configuration"))
    return (*head, *mode_done, apply_config, _stdout("MIG configuration applied successfully"),
            _info("Restarting validator pod to re-run all validations"),
            _info("Restarting all GPU clients previously shutdown in Kubernetes by reenabling their "
                  "component-specific nodeSelector labels"),
            *_set_state("success", restart_clients=False),
            _info(f"Successfully updated to MIG config: {config}", MANAGER_MAIN), _waiting())
