"""One settings object: every GPULAB_* variable read in one place, held by entry points, overridable per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import settings
from cluster.gpu import cel
from labs import runtime

pytestmark = pytest.mark.unit


def test_from_env_reads_every_variable_and_environ_gives_them_back(tmp_path: Path) -> None:
    env = {"GPULAB_STATE_DIR": str(tmp_path / "s"), "GPULAB_CACHE_DIR": "~/c", "GPULAB_LEARNER": " ada ",
           "GPULAB_QUIZ_DB": str(tmp_path / "q.sqlite3"), "GPULAB_ADMISSION_HOOKS": "", "PATH": "/bin"}
    got = settings.Settings.from_env(env)
    assert got.state_dir == tmp_path / "s" and got.cache_dir == Path("~/c").expanduser()
    assert got.learner == "ada" and got.labs_dir is None
    assert got.admission_hooks == settings.DEFAULT_ADMISSION_HOOKS  # empty means unset
    child = got.environ({"PATH": "/bin", "GPULAB_LABS_DIR": "/stale"})
    assert child["GPULAB_STATE_DIR"] == str(tmp_path / "s") and child["PATH"] == "/bin"
    assert "GPULAB_LABS_DIR" not in child and "GPULAB_ADMISSION_HOOKS" not in child
    assert settings.Settings.from_env(child) == got


def test_library_reads_the_environment_until_an_entry_point_holds_settings(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    monkeypatch.setenv("GPULAB_LABS_DIR", str(tmp_path / "env"))
    assert runtime.default_workdir("01-x") == tmp_path / "env" / "01-x"
    with settings.using(settings.Settings(labs_dir=tmp_path / "held")):
        monkeypatch.setenv("GPULAB_LABS_DIR", str(tmp_path / "changed-later"))
        assert runtime.default_workdir("01-x") == tmp_path / "held" / "01-x"  # read once, at the edge
        with settings.overridden(celcheck=tmp_path / "celcheck"):
            assert cel.candidates()[0] == tmp_path / "celcheck"
            assert runtime.default_workdir("01-x") == tmp_path / "held" / "01-x"
        assert cel.candidates()[0] != tmp_path / "celcheck"
    assert runtime.default_workdir("01-x") == tmp_path / "changed-later" / "01-x"


def test_switches_and_class_mode_variables_round_trip(tmp_path: Path) -> None:
    got = settings.Settings.from_env({"GPULAB_ETCD_SEED": "0", "GPULAB_CLASS_DIR": str(tmp_path),
                                      "GPULAB_CLUSTER_ON_DEMAND": "1"})
    assert (got.etcd_seed, got.class_dir, got.cluster_on_demand) == (False, tmp_path, True)
    child = got.environ({})
    assert child == {"GPULAB_ETCD_SEED": "0", "GPULAB_CLASS_DIR": str(tmp_path), "GPULAB_CLUSTER_ON_DEMAND": "1"}
    assert settings.Settings.from_env(child) == got
    unset = settings.Settings.from_env({})
    assert (unset.etcd_seed, unset.class_dir, unset.cluster_on_demand) == (True, None, False)
    assert unset.environ({"GPULAB_ETCD_SEED": "0"}) == {}


# That no other module reads a GPULAB_* variable is tests/static/test_settings_edge.py (an AST scan that also
# follows module constants such as ENV = "GPULAB_CLASS_DIR").
