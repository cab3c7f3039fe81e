"""A simulated container that ends restarts as a kubelet restarts it: by ``restartPolicy``, the first time at
once, then after a back-off of 10 s doubling to 5 minutes in ``CrashLoopBackOff`` with the kubelet's message; each
instance has its own container ID, and the dead one is named in ``lastState`` (what ``--previous`` reads)."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.sim import pod_agent, restarts
from cluster.sim.kubelet import server

UID = "7e0c7d1e-0000-4000-8000-000000000002"


def _pod(policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": "cpu-0", "containers": [{"name": "main", "image": "busybox"}]}
    if policy:
        spec["restartPolicy"] = policy
    return {"metadata": {"name": "flaky", "namespace": "lab-01", "uid": UID}, "spec": spec}


@pytest.mark.parametrize("policy,code,again", [(None, 0, True), ("Always", 1, True), ("OnFailure", 1, True),
                                               ("OnFailure", 0, False), ("Never", 1, False)])
def test_restart_policy_decides_whether_an_ended_container_starts_again(policy: str | None, code: int,
                                                                         again: bool) -> None:
    assert restarts.will_restart(_pod(policy), code) is again


def test_back_off_is_none_then_ten_seconds_doubling_to_five_minutes() -> None:
    assert [restarts.backoff_seconds(n) for n in range(1, 9)] == [0, 10, 20, 40, 80, 160, 300, 300]
    assert [restarts.go_duration(s) for s in (10, 80, 300)] == ["10s", "1m20s", "5m0s"]
    assert restarts.crashloop_message(_pod(), "main", 20) == (
        f"back-off 20s restarting failed container=main pod=flaky_lab-01({UID})")


def test_an_instance_that_ends_names_itself_in_last_state_and_the_next_has_a_new_id() -> None:
    pod = _pod()
    pod["status"] = pod_agent.running_status(pod, None)
    first = pod["status"]["containerStatuses"][0]["containerID"]
    term = pod_agent.ended(pod, 1, 0, "2024-01-01T00:00:10Z")
    ended = pod_agent.backoff_status(pod, term, 1, 0)["containerStatuses"][0]  # the first restart is at once
    assert ended["state"]["terminated"]["containerID"] == first and ended["restartCount"] == 0
    pod["status"] = pod_agent.running_status(pod, None, 1, {"main": {"terminated": term["main"]}})
    second = pod["status"]["containerStatuses"][0]
    assert second["containerID"] != first and second["restartCount"] == 1
    assert second["lastState"]["terminated"]["containerID"] == first
    # The kubelet endpoint reads the running instance, and --previous the one that ended.
    assert server.log_container_id(pod, "main", previous=False) == second["containerID"]
    assert server.log_container_id(pod, "main", previous=True) == first
    # The second end waits out the back-off, showing the instance that ended.
    term = pod_agent.ended(pod, 1, 1, "2024-01-01T00:00:20Z")
    waiting = pod_agent.backoff_status(pod, term, 2, 10)["containerStatuses"][0]
    assert waiting["state"]["waiting"] == {"reason": "CrashLoopBackOff",
                                           "message": restarts.crashloop_message(pod, "main", 10)}
    assert waiting["lastState"]["terminated"]["containerID"] == second["containerID"] == waiting["containerID"]
    assert waiting["restartCount"] == 2 and waiting["lastState"]["terminated"]["reason"] == "Error"
    assert server.log_container_id(dict(pod, status={"containerStatuses": [waiting]}), "main", False) == \
        second["containerID"]


def test_a_container_waiting_for_its_first_start_has_no_container_id() -> None:
    status = pod_agent.container_status({"name": "main"}, UID, {"waiting": {"reason": "ContainerCreating"}}, False)
    assert "containerID" not in status


def test_a_pod_that_will_not_restart_ends_with_its_last_instance_terminated() -> None:
    pod = _pod("Never")
    pod["status"] = pod_agent.running_status(pod, None)
    done = pod_agent.finished_status(pod, 3)
    cs = done["containerStatuses"][0]
    assert done["phase"] == "Failed" and cs["state"]["terminated"]["exitCode"] == 3
    assert cs["state"]["terminated"]["containerID"] == cs["containerID"]
    assert server.log_container_id(dict(pod, status=done), "main", previous=False) == cs["containerID"]
