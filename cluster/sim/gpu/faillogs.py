"""What a failing container of the GPU stack prints before it exits: the upstream programs' own lines, unchanged.

A real cluster says why an operand fails in one place: the failing container's log (``kubectl logs POD -c
CONTAINER``, ``--previous`` once it restarted). None of the operator's DaemonSets sets
``terminationMessagePolicy`` (GPU Operator v26.7.0 ``assets/``), so their termination messages stay empty and
``kubectl describe pod`` shows only the exit code and ``Error``. The lines come from the source of what GPU Operator
v26.7.0 runs: its validator (``OP cmd/nvidia-validator/main.go`` at a22dbf67, v26.7.0+3, the commit the reference
pins), the container toolkit it deploys (v1.20.0, ``cmd/nvidia-ctk-installer``), the driver container's
``nvidia-driver`` script (gpu-driver-container 06a208c) with kmod's ``modprobe`` messages, and the CUDA
``vectorAdd`` sample the validator image builds (cuda-samples ``Samples/0_Introduction/vectorAdd/vectorAdd.cu``).
As in ``startlogs``, a line whose text depends on the host (versions, paths a probe found) is left out rather than
guessed, so each sequence holds the lines that read the same on any node. Each function gives what one container
instance prints from where its start-up lines (``startlogs``) stop to its exit. Plain data; the GPU stack writes the
lines through the kubelet's log store, once per container instance.
"""

from __future__ import annotations

from cluster.sim.gpu.startlogs import DRIVER_SCRIPT, Line

OP = "github.com/NVIDIA/gpu-operator@a22dbf67/"  # v26.7.0 (+3 commits), the reference's OP
VALIDATOR_MAIN = OP + "cmd/nvidia-validator/main.go:"
CTK = "github.com/NVIDIA/nvidia-container-toolkit@v1.20.0/"  # the toolkit v26.7.0's values.yaml deploys
INSTALLER_MAIN = CTK + "cmd/nvidia-ctk-installer/main.go:"
CONTAINERD_SIGNAL = CTK + "cmd/nvidia-ctk-installer/container/runtime/containerd/containerd_linux.go:"
MODPROBE = "github.com/kmod-project/kmod@84fa569/tools/modprobe.c:"
VECTOR_ADD = "github.com/NVIDIA/cuda-samples@c94ff366/Samples/0_Introduction/vectorAdd/vectorAdd.cu:"

# The validator's retries (main.go constants): the CUDA workload pod is polled 60 times, 5 s apart
# (podCreationWaitRetries), the node's GPU resources 30 times, 5 s apart (gpuResourceDiscoveryWaitRetries).
POD_WAIT_RETRIES = 60
GPU_RESOURCE_RETRIES = 30
# The operator mounts the host's containerd socket folder here and points CONTAINERD_SOCKET at it
# (OP controllers/object_controls.go: DefaultRuntimeSocketTargetDir + the socket's base name).
CONTAINERD_SOCKET = "/runtime/sock-dir/containerd.sock"
SIGNAL_ATTEMPTS = 6  # containerd_linux.go maxReloadAttempts
CUDA_WORKLOAD_PREFIX = "nvidia-cuda-validator-"  # OP validator/manifests/cuda-workload-validation.yaml generateName
CUDA_WORKLOAD_APP = "nvidia-cuda-validator"  # that manifest's app label (main.go cudaValidatorLabelValue)
CUDA_WORKLOAD_CONTAINER = "cuda-validation"  # its init container, which runs vectorAdd
NO_DEVICE = "no CUDA-capable device is detected"  # cudaGetErrorString(cudaErrorNoDevice)


def _validator_error(err: str) -> Line:
    # main(): log.SetOutput(os.Stderr); log.Printf("Error: %v", err) -- logrus' Printf logs at info level.
    return Line("logrus", f"Error: {err}", VALIDATOR_MAIN + "410")


def _driver_load() -> tuple[Line, ...]:
    """``_load_driver`` up to its first ``modprobe nvidia``, which runs under ``set -o xtrace`` (bash's ``+ ``)."""
    return (Line("plain", "Loading ipmi and i2c_core kernel modules...", DRIVER_SCRIPT + ":309", stream="stdout"),
            Line("plain", "Loading NVIDIA driver kernel modules...", DRIVER_SCRIPT + ":311", stream="stdout"),
            Line("plain", "+ modprobe nvidia", DRIVER_SCRIPT + ":313"))


def driver_missing(kernel: str) -> tuple[Line, ...]:
    """The driver container finds no ``nvidia`` module for the running kernel: modprobe's fatal lookup error.
    What the script does after the failed load depends on what it left behind, so the lines stop there."""
    return (*_driver_load(),
            Line("plain", f"modprobe: FATAL: Module nvidia not found in directory /lib/modules/{kernel}",
                 MODPROBE + "216"))


def nouveau_bound() -> tuple[Line, ...]:
    """nouveau holds the GPUs: the script runs the installer with ``--no-nouveau-check``, so the failure is the
    kernel's refusal to load ``nvidia`` (its probe finds no device it may bind), as modprobe reports it."""
    return (*_driver_load(),
            Line("plain", "modprobe: ERROR: could not insert 'nvidia': No such device", MODPROBE + "637"))


def toolkit_no_containerd_socket() -> tuple[Line, ...]:
    """``nvidia-ctk-installer`` configured containerd but cannot reach its socket to make it reload (the host's
    containerd listens elsewhere than ``/run/containerd/containerd.sock``, the operator's default): ``Setup`` ->
    ``RestartContainerd`` -> ``SignalContainerd`` retries, then ``Run`` returns, ``shutdown`` runs, main exits 1."""
    dial = f"unable to dial: dial unix {CONTAINERD_SOCKET}: connect: no such file or directory"
    retries = tuple(Line("logrus", f"Error signaling containerd, attempt {i}/{SIGNAL_ATTEMPTS}: {dial}",
                         CONTAINERD_SIGNAL + "102", level="warning") for i in range(1, SIGNAL_ATTEMPTS))
    return (Line("logrus", "Sending SIGHUP signal to containerd", CONTAINERD_SIGNAL + "37"), *retries,
            Line("logrus", f"Max retries reached {SIGNAL_ATTEMPTS}/{SIGNAL_ATTEMPTS}, aborting",
                 CONTAINERD_SIGNAL + "106", level="warning"),
            Line("logrus", "Shutting Down", INSTALLER_MAIN + "404"),
            Line("logrus", "error running nvidia-ctk-installer: unable to setup runtime: unable to restart "
                           f"containerd: {dial}", INSTALLER_MAIN + "76", level="error"))


def cuda_validation(workload_pod: str) -> tuple[Line, ...]:
    """The validator's ``cuda-validation`` init container: it created the workload pod ``workload_pod`` and polls it
    (``waitForPod``), which never gets past Pending while vectorAdd fails in its init container; then it gives up."""
    waits = tuple(Line("logrus", f"pod {workload_pod} is curently in Pending phase", VALIDATOR_MAIN + "1395")
                  for _ in range(POD_WAIT_RETRIES))  # "curently": upstream's spelling
    return (*waits, _validator_error(f"error validating cuda workload: gave up waiting for pod {workload_pod} to be "
                                     "available"))


def vector_add(error: str = NO_DEVICE) -> tuple[Line, ...]:
    """The workload pod's ``cuda-validation`` init container: vectorAdd's first ``cudaMalloc`` fails. Its stderr is
    unbuffered and its stdout (a pipe, fully buffered) is flushed by ``exit``, so the error comes first."""
    return (Line("plain", f"Failed to allocate device vector A (error code {error})!", VECTOR_ADD + "95"),
            Line("plain", "[Vector addition of 50000 elements]", VECTOR_ADD + "67", stream="stdout"))


def plugin_validation() -> tuple[Line, ...]:
    """The validator's ``plugin-validation`` init container (``WITH_WORKLOAD=false`` in v26.7.0's DaemonSet, so no
    workload pod): ``validateGPUResource`` finds no ``nvidia.com/gpu`` or ``nvidia.com/mig-*`` resource with a count
    in the node's capacity on any of its tries and gives up."""
    tries = tuple(Line("logrus", f"GPU resources are not yet discovered by the node, retry: {i}",
                       VALIDATOR_MAIN + "1463") for i in range(1, GPU_RESOURCE_RETRIES + 1))
    return (*tries, _validator_error("error validating plugin installation: GPU resources are not discovered by "
                                     "the node"))


def exit_error(text: str, source: str) -> tuple[Line, ...]:
    """A Go program of the device-plugin repository that returns ``text`` from its CLI: ``klog.Error(err)``, exit 1."""
    return (Line("klog", text, source, level="error"),)
