"""The local control plane's processes: the API server, controller manager and scheduler in one kube-control-plane
process when that binary is built (each with its own flags, the API server first), else three processes."""

from __future__ import annotations

from pathlib import Path

from cluster import binaries, gobuild, pki as pki_mod
from cluster.backends import local
from cluster.backends.local import COMBINED, HOSTED, LocalBackend

PORTS = {"etcd": 2379, "etcd-peer": 2380, "apiserver": 6443, "controller-manager": 10257, "scheduler": 10259,
         "kubelet": 10250}


def _layout(tmp_path: Path, *, built: bool) -> tuple[LocalBackend, dict[str, local.ProcessSpec],
                                                      dict[str, local.ProcessSpec]]:
    bins = binaries.Binaries(tmp_path / "bin", "test")
    bins.directory.mkdir()
    if built:
        (bins.directory / gobuild.extra_binary_name(COMBINED)).write_text("")
    be = LocalBackend("c", tmp_path / "state")
    specs = be._specs(bins, pki_mod.Pki(tmp_path / "pki"), PORTS, 6)
    return be, specs, be._processes(bins, specs)


def test_one_process_runs_the_three_components_each_with_its_own_flags(tmp_path: Path) -> None:
    be, specs, procs = _layout(tmp_path, built=True)
    assert list(procs) == ["etcd", "sim-agents", COMBINED]
    argv = list(procs[COMBINED].argv)
    assert Path(argv[0]).name == gobuild.extra_binary_name(COMBINED)
    assert argv[1] == f"--ready-kubeconfig={be._kc('controller-manager')}"
    starts = [argv.index(f"--component={name}") for name in HOSTED]
    assert starts == sorted(starts) and starts[0] == 2  # the API server first, then the others
    for name, begin, end in zip(HOSTED, starts, [*starts[1:], len(argv)]):
        assert argv[begin + 1:end] == list(specs[name].argv[1:]), name
    assert procs[COMBINED].env == local.APISERVER_GO_ENV
    assert "kube-control-plane" in local.STARTED_FIRST and COMBINED in local.CONTROL_PLANE_PROCESSES


def test_without_the_built_binary_each_component_is_its_own_process(tmp_path: Path) -> None:
    _, specs, procs = _layout(tmp_path, built=False)
    assert procs == specs and set(HOSTED) <= set(procs) and COMBINED not in procs


def test_a_component_in_the_shared_process_reports_that_process(tmp_path: Path) -> None:
    be = LocalBackend("c", tmp_path / "state")
    running = {COMBINED: 4242, "etcd": 4141}
    be.sup.pid = running.get  # type: ignore[method-assign]
    assert [be.component_pid(n) for n in (*local.CONTROL_PLANE, "sim-agents")] == [4141, 4242, 4242, 4242, None]
    rows = {c.name: c for c in be.components()}
    assert rows["kube-scheduler"].running and rows["kube-scheduler"].detail == f"in {COMBINED}"
    assert rows["etcd"].detail == "" and not rows["sim-agents"].running
