"""Safe state handling (issue 15, items 6, 9 and 10): purge deletes only gpulab's own marked folder, credentials go
to a private folder of ours inside the state dir, a process is ours only by pid, start time and command line, and
one command at a time works on a state dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from cluster import errors, pki, safefs, staterecord
from cluster.backends.local import LocalBackend
from cluster.kube import kubeconfig
from cluster.progress import LogProgress
from cluster.supervisor import ProcessSpec, Supervisor
from prerequisites import require

GPULAB = str(Path(sys.executable).with_name("gpulab"))


def _checkout(root: Path) -> Path:
    """What GPULAB_STATE_DIR=<root> finds at <root>/gpulab when the learner cloned the course there."""
    repo = root / "gpulab"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("my notes\n")
    (repo / "state.json").write_text('{"not": "gpulab state"}')  # even a file of that name does not make it ours
    return repo


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- purge ----------------------------------------------------------------------------------------------------


def test_purge_refuses_a_folder_without_the_marker_and_says_why(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    before = _snapshot(repo)
    out = subprocess.run([GPULAB, "down", "--purge"], env={**os.environ, "GPULAB_STATE_DIR": str(tmp_path)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    message = out.stdout + out.stderr
    assert "not a gpulab state folder" in message and safefs.MARKER in message, message
    assert "Traceback" not in message
    assert _snapshot(repo) == before


def test_up_refuses_to_write_into_a_folder_that_is_not_ours(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    before = _snapshot(repo)
    with pytest.raises(errors.ClusterError, match="not a gpulab state folder"):
        LocalBackend("gpulab", tmp_path).up(None, LogProgress())
    assert _snapshot(repo) == before


def test_purge_refuses_a_symlinked_state_folder(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    safefs.claim(target)  # even a marked folder is not deleted through a link
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "gpulab").symlink_to(target)
    with pytest.raises(errors.ClusterError, match="symbolic link"):
        LocalBackend("gpulab", tmp_path / "root").down(purge=True)
    assert (target / safefs.MARKER).exists()


def test_purge_deletes_a_marked_folder_and_an_older_gpulabs_state(tmp_path: Path) -> None:
    be = LocalBackend("gpulab", tmp_path)
    be.save(staterecord.StateRecord("local"))
    assert (be.dir / safefs.MARKER).is_file()
    be.down(purge=True)
    assert not be.dir.exists()
    legacy = tmp_path / "old"
    legacy.mkdir()
    (legacy / "state.json").write_text(json.dumps({"backend": "local", "ports": {}}))
    (legacy / "logs").mkdir()
    LocalBackend("old", tmp_path).down(purge=True)
    assert not legacy.exists()


# --- credentials ----------------------------------------------------------------------------------------------


def _state_with_admin_kubeconfig(root: Path) -> tuple[LocalBackend, Path]:
    be = LocalBackend("gpulab", root)
    be.claim()
    p = pki.ensure(be.dir / "pki")
    kubeconfig.write(be.kubeconfig(), server="https://127.0.0.1:6443", ca_file=p.ca_cert, user="gpulab-admin",
                     cert_file=p.client_cert("admin"), key_file=p.client_key("admin"))
    return be, p.client_key("admin")


def test_embedded_credentials_go_to_a_private_folder_in_the_state_dir_and_leave_with_purge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAB_STATE_DIR", str(tmp_path / "root"))
    be, admin_key = _state_with_admin_kubeconfig(tmp_path / "root")
    secret = admin_key.read_bytes()
    conn = kubeconfig.load(be.kubeconfig())
    assert conn.key_file and Path(conn.key_file).parent == be.dir / "certs"
    assert Path(conn.key_file).read_bytes() == secret
    assert (be.dir / "certs").stat().st_mode & 0o777 == 0o700
    assert Path(conn.key_file).stat().st_mode & 0o777 == 0o600
    shared = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpulab-{os.getuid()}-certs"
    assert not shared.exists() or not any(p.read_bytes() == secret for p in shared.iterdir())
    be.down(purge=True)
    leftovers = [p for p in (tmp_path / "root").rglob("*") if p.is_file() and p.read_bytes() == secret]
    assert not be.dir.exists() and not leftovers


@pytest.mark.parametrize("how", ["mode", "symlink", "owner"])
def test_a_precreated_certificate_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    how: str) -> None:
    monkeypatch.setenv("GPULAB_STATE_DIR", str(tmp_path / "root"))
    be, _ = _state_with_admin_kubeconfig(tmp_path / "root")
    certs = be.dir / "certs"
    if how == "mode":
        certs.mkdir(mode=0o755)
        certs.chmod(0o755)  # another account could put its own CA here
        expected = "mode is 755"
    elif how == "symlink":
        (tmp_path / "attacker").mkdir(mode=0o700)
        certs.symlink_to(tmp_path / "attacker")
        expected = "symbolic link"
    else:
        # this project's machines and CI run as root
        require(os.geteuid() == 0, "making a folder owned by another user needs root")
        certs.mkdir(mode=0o700)
        os.chown(certs, 65534, 65534)
        expected = "belongs to user id 65534"
    with pytest.raises(errors.ClusterError, match=expected) as info:
        kubeconfig.load(be.kubeconfig())
    assert "refusing to keep credentials" in str(info.value)
    assert not any((tmp_path / "attacker").iterdir()) if how == "symlink" else True


def test_kubeconfig_outside_a_state_dir_uses_the_state_roots_private_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAB_STATE_DIR", str(tmp_path / "root"))
    p = pki.ensure(tmp_path / "pki")
    path = kubeconfig.write(tmp_path / "k", server="https://127.0.0.1:1", ca_file=p.ca_cert, user="u",
                            cert_file=p.client_cert("admin"), key_file=p.client_key("admin"))
    conn = kubeconfig.load(path)
    assert conn.cert_file and Path(conn.cert_file).parent == tmp_path / "root" / ".certs"


# --- process identity -----------------------------------------------------------------------------------------


def _sleeper(seconds: int) -> tuple[str, ...]:
    return (sys.executable, "-c", f"import time; time.sleep({seconds})")


def _swap_pid(sup: Supervisor, name: str, old: int, new: int) -> None:
    """Make the pid file name ``new`` instead of ``old``, keeping everything else it records (whatever its format):
    what the file says after the kernel gave the dead component's pid to another process."""
    f = sup.pid_dir / f"{name}.pid"
    f.write_text(f.read_text().replace(str(old), str(new), 1))


@pytest.mark.parametrize("other_argv", ["same program, other arguments", "same command line, started later"])
def test_a_reused_pid_is_not_taken_for_ours(tmp_path: Path, other_argv: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    sup = Supervisor(state)
    ours = sup.start(ProcessSpec("node-agent", _sleeper(30)))
    assert sup.pid("node-agent") == ours
    os.killpg(ours, 9)
    os.waitpid(ours, 0)
    # The kernel counts start times in clock ticks (10 ms); a real reuse takes a wrap of the whole pid space.
    time.sleep(0.05)
    argv = _sleeper(31) if other_argv.startswith("same program") else _sleeper(30)
    unrelated = subprocess.Popen(list(argv), cwd=state, start_new_session=True)
    try:
        _swap_pid(sup, "node-agent", ours, unrelated.pid)
        assert sup.pid("node-agent") is None
        assert sup.state("node-agent").running is False
        assert sup.stop("node-agent") is False
        time.sleep(0.2)
        assert unrelated.poll() is None, "stop signalled a process that is not ours"
    finally:
        unrelated.kill()
        unrelated.wait()


def test_our_own_process_is_recognised_and_stopped(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    sup = Supervisor(state)
    pid = sup.start(ProcessSpec("pod-agent", _sleeper(30)))
    record = json.loads((sup.pid_dir / "pod-agent.pid").read_text())
    assert record["pid"] == pid and record["argv"] == list(_sleeper(30)) and record["start"]
    assert sup.pid("pod-agent") == pid
    assert sup.stop("pod-agent") is True
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


# --- one command at a time ------------------------------------------------------------------------------------


_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from cluster import safefs
    d = Path(sys.argv[1])
    safefs.claim(d)
    with safefs.locked(d, what="gpulab up"):
        print("holding", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def test_a_second_command_waits_for_the_lock_and_says_for_whom(tmp_path: Path) -> None:
    d = tmp_path / "gpulab"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(d), "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout and holder.stdout.readline().strip() == "holding"
        told: list[str] = []
        started = time.monotonic()
        with safefs.locked(d, what="gpulab down", notify=told.append):
            waited = time.monotonic() - started
        assert waited > 0.5, waited
        assert len(told) == 1 and f"`gpulab up` (pid {holder.pid})" in told[0] and str(d) in told[0]
    finally:
        holder.wait(10)


def test_a_lock_held_too_long_is_a_clear_error(tmp_path: Path) -> None:
    d = tmp_path / "gpulab"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(d), "5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout and holder.stdout.readline().strip() == "holding"
        with pytest.raises(errors.ClusterError, match=r"`gpulab up` \(pid \d+\) has been working on the cluster"):
            with safefs.locked(d, wait=0.5, notify=lambda _: None):
                pass
    finally:
        holder.kill()
        holder.wait()


def test_a_folder_purged_while_waiting_is_locked_afresh(tmp_path: Path) -> None:
    d = tmp_path / "gpulab"
    script = _HOLDER.replace('time.sleep(float(sys.argv[2]))',
                             'time.sleep(float(sys.argv[2])); safefs.purge(d)')
    holder = subprocess.Popen([sys.executable, "-c", script, str(d), "1"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout and holder.stdout.readline().strip() == "holding"
        with safefs.locked(d, notify=lambda _: None):
            assert safefs.is_marked(d)
            assert (d / safefs.LOCK).exists()
    finally:
        holder.wait(10)


def test_purge_never_deletes_a_folder_on_the_word_of_an_old_state_json_alone(tmp_path: Path) -> None:
    """A folder with an older gpulab's state.json but other files too (a checkout, someone's work) is neither
    adopted nor deleted by down --purge: one clear error, everything left as it was."""
    folder = tmp_path / "gpulab"
    folder.mkdir()
    (folder / "state.json").write_text(json.dumps({"backend": "local"}))
    (folder / "README.md").write_text("my notes")
    (folder / ".git").mkdir()
    before = _snapshot(folder)
    with pytest.raises(errors.ClusterError, match="does not delete the folder"):
        LocalBackend("gpulab", tmp_path).down(purge=True)
    assert _snapshot(folder) == before and not (folder / safefs.MARKER).exists()
