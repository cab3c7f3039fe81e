"""`gpulab gpu-operator install --set/-f` reads values as Helm does and maps them onto the ClusterPolicy as the
chart's template does (NVIDIA/gpu-operator deployments/gpu-operator/templates/clusterpolicy.yaml,
plugin_config.yaml, mig_config.yaml); unknown paths and bad YAML are clear messages, never tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster import errors
from cluster.gpu import helm_values
from cluster.sim.gpu import manifests
from labs.cli.main import main


def _render(*sets: str, files: tuple[tuple[str, str], ...] = ()) -> helm_values.Rendered:
    return helm_values.render(helm_values.values_from(files, sets))


def test_the_vendored_values_are_the_charts_defaults() -> None:
    """The copy holds the chart's documented defaults: single MIG strategy, every operand switch, empty configs."""
    d = helm_values.chart_defaults()
    assert d["mig"] == {"strategy": "single"}
    assert d["devicePlugin"]["config"] == {"create": False, "name": "", "default": "", "data": {}}
    assert d["migManager"]["config"]["default"] == "all-disabled"
    assert d["dcgmExporter"]["enabled"] is True and d["dcgm"]["enabled"] is False


def test_device_plugin_config_renders_name_and_default_only_when_a_name_is_set() -> None:
    assert _render("devicePlugin.config.name=plugin-config,devicePlugin.config.default=any").spec == {
        "devicePlugin": {"config": {"name": "plugin-config", "default": "any"}}}
    # the template's `if .Values.devicePlugin.config.name`: a default alone renders nothing
    assert _render("devicePlugin.config.default=any").spec == {}


def test_mig_manager_config_default_renders_always_and_its_name_only_when_set() -> None:
    assert _render("migManager.config.default=all-1g.10gb").spec == {
        "migManager": {"config": {"default": "all-1g.10gb"}}}
    assert _render("migManager.config.name=custom").spec == {
        "migManager": {"config": {"name": "custom", "default": "all-disabled"}}}


def test_enabled_switches_strategy_and_set_typing() -> None:
    r = _render("dcgmExporter.enabled=false", "mig.strategy=mixed", "gfd.enabled=true")
    assert r.spec == {"dcgmExporter": {"enabled": False}, "gfd": {"enabled": True}, "mig": {"strategy": "mixed"}}
    # an empty strategy is left out, as `if .Values.mig.strategy` does
    assert _render("mig.strategy=").spec == {}


def test_a_later_set_wins_over_a_values_file_and_null_removes() -> None:
    files = (("v.yaml", "mig:\n  strategy: mixed\ndevicePlugin:\n  enabled: false\n"),)
    assert _render("mig.strategy=none", files=files).spec == {"mig": {"strategy": "none"},
                                                             "devicePlugin": {"enabled": False}}
    assert _render("mig.strategy=null", files=files).spec == {"devicePlugin": {"enabled": False}}


def test_create_with_data_makes_the_configmap_named_by_the_config_name() -> None:
    files = (("v.yaml", "devicePlugin:\n  config:\n    create: true\n    name: plugin-config\n    default: any\n"
                        "    data:\n      any: |-\n        version: v1\n"),)
    r = _render(files=files)
    assert r.configmaps == ({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "plugin-config", "namespace": "gpu-operator"},
                             "data": {"any": "version: v1"}},)
    with pytest.raises(errors.ConfigError, match="which is empty"):
        _render("devicePlugin.config.create=true,devicePlugin.config.data.any=x")


def test_unknown_paths_are_all_reported_with_the_nearest_known_one() -> None:
    with pytest.raises(errors.ConfigError) as info:
        _render("dcgmExporter.enable=false", "devicePlugin.conig.name=x", "gfd.enabled=maybe")
    text = str(info.value)
    assert "did you mean dcgmExporter.enabled?" in text and "did you mean devicePlugin.config?" in text
    assert "gfd.enabled: must be true or false" in text
    # below a free-form key (env, data, resources) anything goes
    assert _render("devicePlugin.env=x", "driver.resources.limits.cpu=1").ignored == (
        "devicePlugin.env", "driver.resources.limits.cpu")


def test_known_but_unmodelled_paths_are_ignored_with_a_note_and_mps_root_is_never_rendered() -> None:
    r = _render("devicePlugin.mps.root=/var/mps", "devicePlugin.version=v0.18.0")
    assert r.spec == {} and r.ignored == ("devicePlugin.mps.root", "devicePlugin.version")


@pytest.mark.parametrize("text,where", [("a: [\n", "line 2"), ("- 1\n- 2\n", "must be a mapping"),
                                        ("mig:\n\tstrategy: x\n", "line 2")])
def test_bad_values_files_are_clear_errors(text: str, where: str) -> None:
    with pytest.raises(errors.ConfigError, match=where):
        helm_values.load_file(text, "values.yaml")


def test_the_cli_dry_run_prints_the_policy_and_refuses_unknown_paths(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("mig:\n  strategy: mixed\n")
    assert main(["gpu-operator", "install", "-f", str(values), "--set", "dcgmExporter.enabled=false",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "strategy: mixed" in out and "kind: ClusterPolicy" in out
    assert main(["gpu-operator", "install", "--set", "migManger.enabled=false", "--dry-run"]) == 1
    assert "did you mean migManager?" in capsys.readouterr().err
    values.write_text("mig: [\n")
    assert main(["gpu-operator", "install", "-f", str(values), "--dry-run"]) == 1
    assert "not valid YAML" in capsys.readouterr().err


def test_values_apply_over_the_default_policy_and_keep_its_required_fields() -> None:
    policy = helm_values.apply(manifests.cluster_policy(), _render("devicePlugin.enabled=false"))
    assert policy["spec"]["devicePlugin"] == {"enabled": False, "mps": {"root": "/run/nvidia/mps"}}
    assert policy["spec"]["operator"] == {"defaultRuntime": "containerd"}
