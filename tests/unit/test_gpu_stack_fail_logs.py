"""A failing operand says why in its container's log, with the upstream program's own lines: each line names the
source it comes from (file and line at a commit or tag), and its text is what that source line prints (checked
against the recorded source lines in tests/fixtures/upstream/faillogs-sources.json). Each failed container instance
gets its lines once however often the stack reconciles, and the kubelet's termination message stays empty unless the
container's policy falls back to its log (then the log's tail, at most 80 lines and 2,048 bytes)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cluster.sim import nodes, pod_agent
from cluster.sim.gpu import faillogs, hoststate, operandlogs, operands, startlogs
from cluster.sim.kubelet import logstore

FIXTURE = Path(__file__).parent.parent / "fixtures" / "upstream" / "faillogs-sources.json"
SOURCES: dict[str, str] = json.loads(FIXTURE.read_text())["lines"]
SEQUENCES = {
    "driver-missing": faillogs.driver_missing(nodes.KERNEL_VERSION), "nouveau-bound": faillogs.nouveau_bound(),
    "toolkit": faillogs.toolkit_no_containerd_socket(), "cuda": faillogs.cuda_validation("nvidia-cuda-validator-x2k9q"),
    "vectorAdd": faillogs.vector_add(), "plugin": faillogs.plugin_validation(),
    "toolkit-start": startlogs.LINES["nvidia-container-toolkit-ctr"],
}
LINES = [(k, line) for k, seq in SEQUENCES.items() for line in seq]
# What prints a line around the source's format string: kmod's log_printf prefixes the program and the priority,
# bash's xtrace prefixes "+ " to the command it runs.
_PREFIX = re.compile(r"^(modprobe: (FATAL|ERROR): |\+ )")


def _template(source_line: str) -> str:
    literal = re.search(r'"((?:[^"\\]|\\.)*)"', source_line)
    if literal is None:  # a shell command, as xtrace prints it
        return source_line.strip()
    return literal.group(1).replace('\\"', '"').replace("\\n", "")


def _pattern(template: str) -> str:
    return "".join(".+" if re.fullmatch(r"%[-+# 0-9.]*[a-zA-Z]", part) else re.escape(part)
                   for part in re.split(r"(%[-+# 0-9.]*[a-zA-Z])", template))


@pytest.mark.parametrize("seq,line", LINES, ids=[f"{k}:{line.text[:30]}" for k, line in LINES])
def test_each_line_is_what_its_upstream_source_line_prints(seq: str, line: startlogs.Line) -> None:
    assert re.fullmatch(r"github\.com/[\w-]+/[\w-]+@[\w.]+/.+:\d+", line.source), line.source
    assert line.source in SOURCES, f"{line.source} is not recorded (run tests/fixtures/upstream/record_*.py)"
    text = _PREFIX.sub("", line.text)
    assert re.fullmatch(_pattern(_template(SOURCES[line.source])), text), (line.text, SOURCES[line.source])


def test_no_line_is_made_up_text() -> None:
    """Nothing a learner reads names gpulab's fault injection."""
    every = [line.text for _, line in LINES] + [
        line.text for f in hoststate.FAULT_KINDS for st in _states(f).values() for line in st.lines]
    assert every and not [t for t in every if "simulated" in t or "gpulab" in t.replace(nodes.KERNEL_VERSION, "")]


def _states(kind: str) -> dict[str, operands.OperandState]:
    f = hoststate.Faults(frozenset({kind}), frozenset({0}) if kind == "gpu-unhealthy" else frozenset())
    return operands.states(f, None, None, None)


def test_each_fault_fails_its_container_with_its_lines() -> None:
    expect = {"driver-missing": ("driver", "nvidia-driver-ctr", faillogs.driver_missing(nodes.KERNEL_VERSION)),
              "nouveau-bound": ("driver", "nvidia-driver-ctr", faillogs.nouveau_bound()),
              "toolkit-misconfigured": ("container-toolkit", "nvidia-container-toolkit-ctr",
                                        faillogs.toolkit_no_containerd_socket()),
              "plugin-validation-failing": ("operator-validator", "plugin-validation", faillogs.plugin_validation())}
    for kind, (operand, container, lines) in expect.items():
        st = _states(kind)[operand]
        assert (st.phase in (operands.CRASH, operands.INIT_CRASH), st.container, st.lines) == (True, container, lines)
    # The CUDA validation's lines name the workload pod it creates: the stack builds them (faillogs.cuda_validation).
    assert _states("cuda-validation-failing")["operator-validator"].container == "cuda-validation"


def test_the_cuda_validation_polls_its_workload_pod_then_gives_up() -> None:
    lines = faillogs.cuda_validation("nvidia-cuda-validator-x2k9q")
    assert len(lines) == faillogs.POD_WAIT_RETRIES + 1
    assert lines[-1].text == ("Error: error validating cuda workload: gave up waiting for pod "
                              "nvidia-cuda-validator-x2k9q to be available")
    assert startlogs.render(lines[0], 0) == ('time="1970-01-01T00:00:00Z" level=info '
                                             'msg="pod nvidia-cuda-validator-x2k9q is curently in Pending phase"')


def test_vector_add_prints_its_error_before_its_buffered_stdout() -> None:
    err, out = faillogs.vector_add()
    assert (err.stream, out.stream) == ("stderr", "stdout")
    assert err.text == "Failed to allocate device vector A (error code no CUDA-capable device is detected)!"


def test_plugin_validation_retries_thirty_times() -> None:
    lines = faillogs.plugin_validation()
    assert [line.text for line in lines[:2]] == ["GPU resources are not yet discovered by the node, retry: 1",
                                                 "GPU resources are not yet discovered by the node, retry: 2"]
    assert len(lines) == 31 and lines[-1].text.endswith("GPU resources are not discovered by the node")


# --- written once per instance ---------------------------------------------------------------------------------


def _pod(restarts: int = 0, policy: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "nvidia-driver-ctr", "image": "img"}
    if policy:
        c["terminationMessagePolicy"] = policy
    return {"metadata": {"namespace": "gpu-operator", "name": "nvidia-driver-daemonset-abcde", "uid": "u-1"},
            "spec": {"containers": [c]},
            "status": {"containerStatuses": [{"name": "nvidia-driver-ctr", "restartCount": restarts}]}}


def _log(store: logstore.LogStore, restart: int) -> list[str]:
    ref = logstore.ContainerRef("gpu-operator", "nvidia-driver-daemonset-abcde", "u-1", "nvidia-driver-ctr", restart)
    return [raw.split(" ", 3)[3] for raw in store.read(ref).decode().splitlines()]


def test_a_failing_instance_gets_its_lines_once(tmp_path: Path) -> None:
    store = logstore.LogStore(tmp_path)
    logs = operandlogs.OperandLogs(store)
    st = _states("nouveau-bound")["driver"]
    pod = _pod()
    for _ in range(3):  # the stack reconciles the node again and again
        assert logs.write(pod, st) == ""  # the DaemonSet's default policy: no termination message
    text = _log(store, 0)
    # nobody started this instance's log: the script's first line comes first, then the failure, once
    assert text == ["DRIVER_ARCH is x86_64", *(line.text for line in faillogs.nouveau_bound())]
    assert logs.is_written(pod, st) and not logs.changed(pod, st)


def test_another_failure_of_the_same_container_goes_to_its_next_instance(tmp_path: Path) -> None:
    store = logstore.LogStore(tmp_path)
    logs = operandlogs.OperandLogs(store)
    logs.write(_pod(0), _states("nouveau-bound")["driver"])
    missing = _states("driver-missing")["driver"]
    assert logs.changed(_pod(1), missing) and not logs.is_written(_pod(1), missing)
    logs.write(_pod(1), missing)
    assert _log(store, 1)[-1].startswith("modprobe: FATAL: Module nvidia not found")
    assert "modprobe: FATAL" not in " ".join(_log(store, 0))
    logs.forget([])
    assert not logs.changed(_pod(1), _states("nouveau-bound")["driver"])  # forgotten with its pod


def test_fallback_to_logs_gives_the_logs_tail_as_the_termination_message(tmp_path: Path) -> None:
    store = logstore.LogStore(tmp_path)
    message = operandlogs.OperandLogs(store).write(_pod(policy="FallbackToLogsOnError"), _states("driver-missing")["driver"])
    assert message.endswith("modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.8.0-gpulab")
    assert message.startswith("DRIVER_ARCH is x86_64")


def test_the_kubelets_tail_is_80_lines_and_2048_bytes() -> None:
    spec = {"name": "c", "terminationMessagePolicy": "FallbackToLogsOnError"}
    many = b"".join(logstore.cri_line(0, "stderr", f"line {i}") for i in range(100))
    assert pod_agent.termination_message(spec, many).splitlines() == [f"line {i}" for i in range(20, 100)]
    long = b"".join(logstore.cri_line(0, "stdout", "x" * 100) for _ in range(30))
    assert len(pod_agent.termination_message(spec, long)) == 2048
    assert pod_agent.termination_message({"name": "c"}, many) == ""
    assert pod_agent.termination_message({**spec, "terminationMessagePolicy": "File"}, many) == ""


def test_without_a_log_store_nothing_is_written_and_no_message_given() -> None:
    logs = operandlogs.OperandLogs(None)
    assert logs.write(_pod(policy="FallbackToLogsOnError"), _states("nouveau-bound")["driver"]) == ""
