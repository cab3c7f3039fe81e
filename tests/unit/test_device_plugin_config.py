"""The device-plugin config file is read the way the real plugin reads it (gpu-semantics §1)."""

from __future__ import annotations

import pytest

from cluster.gpu import device_plugin_config as dpc

pytestmark = pytest.mark.unit

DECODE = (
    "error starting plugins: unable to load config: unable to finalize config: unable to parse config file: "
    "error parsing config file: unmarshal error: error unmarshaling JSON: while decoding JSON: "
)


def crash(text: str, **kw: str) -> str:
    with pytest.raises(dpc.PluginConfigError) as info:
        dpc.load(text, **kw)
    return info.value.crash_message


def ts(resources: str, extra: str = "") -> str:
    return f"version: v1\nsharing:\n  timeSlicing:\n{extra}    resources:\n{resources}"


def test_replicas_one_is_an_error() -> None:
    """gpu-semantics §1 replicas < 2: `number of replicas must be >= 2` (1 is an error, not a no-op)."""
    assert crash(ts("    - name: nvidia.com/gpu\n      replicas: 1\n")) == DECODE + "number of replicas must be >= 2"


@pytest.mark.parametrize(
    ("resources", "msg"),
    [
        ("      []\n", "no resources specified"),
        ("    - replicas: 4\n", "no resource name specified"),
        ("    - name: gpu\n", "no replicas specified"),
        ("    - name: gpu\n      replicas: 2\n      devices: some\n", "devices set as 'some' but the only valid string input is 'all'"),
        ("    - name: gpu\n      replicas: 2\n      devices: 0\n", "devices set as '0' but a count of devices must be > 0"),
    ],
)
def test_replicated_resource_errors(resources: str, msg: str) -> None:
    """gpu-semantics §1 error table: resources empty / no name / no replicas / devices 'some' / devices 0."""
    assert crash(ts(resources)) == DECODE + msg


def test_missing_resources_key() -> None:
    """gpu-semantics §1 `resources` missing: `no resources specified`."""
    assert crash("sharing:\n  timeSlicing:\n    renameByDefault: true\n") == DECODE + "no resources specified"


def test_unknown_version() -> None:
    """gpu-semantics §1 version: anything but v1 -> `unknown version: <v>`; empty means v1."""
    assert crash("version: v2\n").endswith("error parsing config file: unknown version: v2")
    assert dpc.load("flags: {migStrategy: none}\n").version == "v1"


def test_unknown_keys_are_ignored_but_reported() -> None:
    """gpu-semantics §1 non-strict parsing: a misspelt section gives no sharing and no error."""
    cfg = dpc.load(ts("    - name: gpu\n      replicas: 4\n").replace("timeSlicing", "timeSlice") + "bogus: 1\n")
    assert cfg.sharing_strategy == "none"
    assert sorted(cfg.ignored_keys) == ["bogus", "sharing.timeSlice"]


def test_struct_keys_match_case_insensitively() -> None:
    """gpu-semantics §1 parsing via sigs.k8s.io/yaml + encoding/json: struct keys fold case, so `timeslicing`
    still configures time-slicing (the reference's `timeslicing` example is wrong: its own library documents
    case-insensitive decoding). Keys inside timeSlicing are exact map lookups."""
    cfg = dpc.load("sharing:\n  timeslicing:\n    resources:\n    - name: gpu\n      replicas: 3\n")
    assert cfg.sharing_strategy == "time-slicing"
    assert crash("sharing:\n  timeSlicing:\n    Resources:\n    - name: gpu\n      replicas: 3\n") == DECODE + "no resources specified"


def test_gpu_is_prefixed() -> None:
    """gpu-semantics §1 schema: `gpu` is auto-prefixed to nvidia.com/gpu."""
    cfg = dpc.load(ts("    - name: gpu\n      replicas: 10\n"))
    assert cfg.replication("nvidia.com/gpu") == dpc.ReplicatedResource("nvidia.com/gpu", 10)


def test_resource_name_too_long() -> None:
    """gpu-semantics §1 schema: names are at most 63 characters."""
    name = "x" * 60
    assert crash(ts(f"    - name: {name}\n      replicas: 2\n")) == (
        DECODE + f"fully-qualified resource name must be 63 characters or less: nvidia.com/{name}"
    )


def test_rename_and_devices_are_neutralised_with_log_lines() -> None:
    """gpu-semantics §1 DisableResourceNamingInConfig: rename (unless <name>.shared) and devices ignored, logged."""
    cfg = dpc.load(ts("    - name: gpu\n      replicas: 3\n      rename: gpu-shared\n      devices: [0, 1]\n"))
    r = cfg.replication("nvidia.com/gpu")
    assert r is not None and r.rename == "" and r.advertised_name == "nvidia.com/gpu"
    assert cfg.log_lines == (
        "Setting the 'rename' field in sharing.timeSlicing.resources is not yet supported in the config. Ignoring...",
        "Customizing the 'devices' field in sharing.timeSlicing.resources is not yet supported in the config. Ignoring...",
    )


def test_rename_by_default_is_the_only_renaming() -> None:
    """gpu-semantics §1: `renameByDefault: true` advertises <name>.shared; an explicit <name>.shared is silent."""
    cfg = dpc.load(ts("    - name: gpu\n      replicas: 4\n      rename: gpu.shared\n", "    renameByDefault: true\n"))
    r = cfg.replication("nvidia.com/gpu")
    assert r is not None and r.advertised_name == "nvidia.com/gpu.shared"
    assert cfg.log_lines == ()


def test_mps_wins_over_time_slicing() -> None:
    """gpu-semantics §1 time-slicing together with MPS: no error, MPS wins."""
    text = "flags: {mpsRoot: /run/nvidia/mps}\nsharing:\n  timeSlicing: {resources: [{name: gpu, replicas: 3}]}\n  mps: {resources: [{name: gpu, replicas: 5}]}\n"
    cfg = dpc.load(text)
    assert cfg.sharing_strategy == "mps"
    assert cfg.replication("nvidia.com/gpu") == dpc.ReplicatedResource("nvidia.com/gpu", 5)


def test_mps_flag_rules() -> None:
    """gpu-semantics §1 flag validation when MPS is active: mixed strategy and missing mpsRoot."""
    mps = "sharing: {mps: {resources: [{name: gpu, replicas: 4}]}}\n"
    assert crash(mps).endswith("unable to validate flags: using MPS requires --mps-root to be specified")
    mixed = "flags: {migStrategy: mixed, mpsRoot: /m}\n" + mps
    assert crash(mixed) == "error starting plugins: unable to validate flags: using --mig-strategy=mixed is not supported with MPS"


@pytest.mark.parametrize(
    ("flags", "msg"),
    [
        ("{migStrategy: bogus}", "unknown MIG strategy: bogus"),
        ("{plugin: {deviceIDStrategy: serial}}", "invalid --device-id-strategy option: serial"),
        ("{plugin: {deviceListStrategy: [envvar, nope]}}", "invalid --device-list-strategy option: invalid strategy: nope"),
        ("{plugin: {sharedDevicesAllocationPolicy: random}}", "invalid --shared-devices-allocation-policy option: random"),
    ],
)
def test_flag_validation_errors(flags: str, msg: str) -> None:
    """gpu-semantics §1 flag validation (`unable to validate flags: ` prefix)."""
    assert crash(f"flags: {flags}\n") == "error starting plugins: unable to validate flags: " + msg


def test_fail_requests_greater_than_one_defaults() -> None:
    """gpu-semantics §1 failRequestsGreaterThanOne: timeSlicing false, MPS true, explicit MPS false honoured."""
    assert dpc.load(ts("    - name: gpu\n      replicas: 2\n")).fail_requests_greater_than_one is False
    mps = "flags: {mpsRoot: /m}\nsharing: {mps: {%sresources: [{name: gpu, replicas: 2}]}}\n"
    assert dpc.load(mps % "").fail_requests_greater_than_one is True
    assert dpc.load(mps % "failRequestsGreaterThanOne: false, ").fail_requests_greater_than_one is False
    assert dpc.load(ts("    - name: gpu\n      replicas: 2\n", "    failRequestsGreaterThanOne: true\n")).fail_requests_greater_than_one


def test_operator_env_overrides_file_strategy() -> None:
    """gpu-semantics §1 precedence: the operator's MIG_STRATEGY env (ClusterPolicy) beats flags.migStrategy."""
    cfg = dpc.load("flags: {migStrategy: none}\n", env_mig_strategy="mixed")
    assert cfg.flags.mig_strategy == "mixed"
    assert dpc.load("flags: {migStrategy: single}\n", env_mig_strategy="").flags.mig_strategy == "single"


def test_yaml_syntax_error_is_a_crash_not_a_traceback() -> None:
    """gpu-semantics §1 parsing: a file that is not YAML crashes the plugin with a converting error."""
    assert "unmarshal error: error converting YAML to JSON: yaml: line" in crash("sharing: [1,\n")


def test_empty_file_is_the_empty_config() -> None:
    """gpu-semantics §1 fallbacks: the empty config means flags and env only."""
    assert dpc.load("") == dpc.empty()


@pytest.mark.parametrize(
    ("label", "default", "fallbacks", "want"),
    [
        ("ts4", None, ("empty",), dpc.Selection(name="ts4")),
        (None, "ts4", ("empty",), dpc.Selection(name="ts4")),
        (None, None, ("empty",), dpc.Selection(name=None)),
        (None, None, ("named", "single"), dpc.Selection(name="default")),
        ("nope", "ts4", ("empty",), dpc.Selection(error="specified config nope does not exist")),
        (None, "gone", ("empty",), dpc.Selection(error="specified config  does not exist")),
        (None, None, ("bogus",), dpc.Selection(error="unknown fallback strategy: bogus")),
    ],
)
def test_per_node_selection(label: str | None, default: str | None, fallbacks: tuple[str, ...], want: dpc.Selection) -> None:
    """gpu-semantics §1 per-node config selection: label -> default -> fallbacks; unknown value keeps the old config."""
    data = {"ts4": "...", "default": "...", "..data": "x"}
    got = dpc.select_config(data, label, default, fallbacks)
    assert got == want
    assert got.previous_kept is (want.error is not None)


def test_single_fallback_and_all_fallbacks_failing() -> None:
    """gpu-semantics §1 Helm fallbacks named,single: the only key, else every fallback fails."""
    assert dpc.select_config({"any": "x"}, None, None, ("named", "single")) == dpc.Selection(name="any")
    got = dpc.select_config({"a": "x", "b": "y"}, None, None, ("named", "single"))
    assert got.error == "no config was set, no default was provided, and all fallbacks failed"
    assert dpc.select_config({}, None, None).error == "no configuration files available"


# --- the disagreement classes NVIDIA's decoder found (issue 14); each expectation is dpcheck's answer at
# k8s-device-plugin v0.19.1 (tests/unit/test_device_plugin_referee.py checks them all when dpcheck is built) ---

VALIDATE = "error starting plugins: unable to validate flags: "


def test_empty_time_slicing_is_refused_like_nvidia() -> None:
    """`timeSlicing:` with no value still runs ReplicatedResources.UnmarshalJSON (DP replicas.go): refused."""
    assert crash("version: v1\nsharing:\n  timeSlicing:\n") == DECODE + "no resources specified"
    assert dpc.load("version: v1\nsharing:\n  mps:\n").mps is None  # a nil pointer: no decoder runs


@pytest.mark.parametrize("replicas", ["4.0", "1e1", "0x4", "+4"])
def test_integral_numbers_are_replicas(replicas: str) -> None:
    """sigs.k8s.io/yaml writes 4.0 as 4 and 1e1 as 10 in its JSON, which an int field accepts."""
    config = dpc.load(ts(f"    - name: gpu\n      replicas: {replicas}\n"))
    assert config.time_slicing is not None and config.time_slicing.resources[0].replicas in (4, 10)


def test_non_integral_and_quoted_replicas_are_refused_with_the_struct_path() -> None:
    msg = crash(ts("    - name: gpu\n      replicas: 4.5\n"))
    assert msg == DECODE + "json: cannot unmarshal number 4.5 into Go struct field Sharing.sharing.timeSlicing of type int"
    msg = crash(ts("    - name: gpu\n      replicas: \"4\"\n"))
    assert msg == DECODE + "json: cannot unmarshal string into Go struct field Sharing.sharing.timeSlicing of type int"


def test_imex_channel_ids_are_validated() -> None:
    """DP cmd/nvidia-device-plugin/main.go validateFlags -> api/config/v1/imex.go AssertChannelIDsValid."""
    assert dpc.load("imex: {channelIDs: [0]}\n").imex_channel_ids == (0,)
    assert crash("imex: {channelIDs: [0, 1]}\n") == (
        VALIDATE + "invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found [0 1]")
    assert crash('imex: {channelIDs: "0"}\n') == (
        DECODE + "json: cannot unmarshal string into Go struct field Imex.imex.channelIDs of type []int")


@pytest.mark.parametrize(("interval", "msg"), [
    ("60s", None), ("60", None), ("infinite", None), ("abc", 'time: invalid duration "abc"'),
    ('"60"', 'time: missing unit in duration "60"'), ("true", "invalid duration"),
])
def test_gfd_sleep_interval_is_decoded_even_though_the_plugin_drops_gfd(interval: str, msg: str | None) -> None:
    """v1.Duration.UnmarshalJSON runs while decoding; loadConfig sets Flags.GFD to nil only afterwards."""
    text = f"flags:\n  gfd:\n    sleepInterval: {interval}\n"
    if msg is None:
        dpc.load(text)
    else:
        assert crash(text) == DECODE + msg


def test_top_level_resources_are_decoded_then_ignored() -> None:
    config = dpc.load("resources:\n  gpus:\n  - {pattern: '*', name: gpu, count: 2}\n")
    assert config.ignored_keys == ("resources.gpus.0.count",)
    assert config.log_lines == ("Customizing the 'resources' field is not yet supported in the config. Ignoring...",)
    assert crash("resources: [{pattern: '*', name: gpu}]\n") == (
        DECODE + "json: cannot unmarshal array into Go struct field Config.resources of type v1.Resources")
    assert crash("resources: {gpus: [{pattern: '*'}]}\n") == DECODE + "resources must have a 'name' field set"


def test_only_the_first_yaml_document_is_read() -> None:
    config = dpc.load(ts("    - name: gpu\n      replicas: 4\n") + "---\nversion: v2\nthis: [is: broken\n")
    assert config.time_slicing is not None and config.time_slicing.resources[0].replicas == 4


def test_json_and_capitalised_top_levels_are_configs_too() -> None:
    config = dpc.load('{"Version": "v1", "Sharing": {"TimeSlicing": {"resources": [{"name": "gpu", "replicas": 3}]}}}')
    assert config.time_slicing is not None and config.time_slicing.resources[0].replicas == 3
    assert ("Sharing", "sharing") in config.folded_keys


def test_dropped_keys_under_imex_and_inside_sharing_are_reported() -> None:
    config = dpc.load(ts("    - name: gpu\n      replicas: 4\n      replica: 8\n", "    Resources: []\n")
                      + "imex:\n  channelIds2: [5]\n")
    assert config.ignored_keys == ("imex.channelIds2", "sharing.timeSlicing.Resources",
                                   "sharing.timeSlicing.resources.0.replica")


def test_yaml_1_1_booleans_as_go_yaml_reads_them() -> None:
    assert dpc.load(ts("    - name: gpu\n      replicas: 4\n", "    renameByDefault: yes\n")).time_slicing.rename_by_default  # type: ignore[union-attr]


def _lint(name: str, text: str) -> list[str]:
    from graders import lint

    return [f.message for f in lint.lint_texts({name: text}, compile_cel=False).findings if f.rule == "device-plugin-config"]


def _configmap(key: str, body: str) -> str:
    indented = "\n".join("    " + line for line in body.splitlines())
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, namespace: gpu-operator}}\ndata:\n  {key}: |\n{indented}\n"


@pytest.mark.parametrize("key", ["a100-ts", "config.json", "Default", "sharing.yml"])
def test_linter_reads_configs_under_any_configmap_key_and_json(key: str) -> None:
    """The config-manager serves any key as the plugin's file, and the plugin reads JSON as YAML."""
    body = ('{"version": "v1", "sharing": {"timeSlicing": {}}}' if key.endswith(".json")
            else "version: v1\nSharing:\n  timeSlicing:\n")
    messages = _lint("cm.yaml", _configmap(key, body))
    assert any("no resources specified" in m and "crash-loops" in m for m in messages), messages


def test_linter_flags_dropped_imex_keys_and_capitalised_top_levels() -> None:
    messages = _lint("c.yaml", "version: v1\nFlags:\n  migStrategy: single\nimex:\n  channelIds: [0]\n  channels: [0]\n")
    assert any("silently ignores `imex.channels`" in m for m in messages), messages
    assert any("`Flags` works only because" in m for m in messages), messages
    assert any("`imex.channelIds` works only because" in m for m in messages), messages


def test_linter_quotes_the_validation_line_the_plugin_prints() -> None:
    messages = _lint("c.yaml", "version: v1\nflags:\n  migStrategy: sometimes\n")
    assert any("`error starting plugins: unable to validate flags: unknown MIG strategy: sometimes`" in m
               for m in messages), messages
    assert not any("unable to load config: unable to validate" in m for m in messages)


def test_linter_says_a_second_config_document_is_ignored() -> None:
    text = "version: v1\nflags: {migStrategy: single}\n---\nversion: v1\nsharing: {timeSlicing: {}}\n"
    messages = _lint("c.yaml", text)
    assert any("reads only the first YAML document" in m for m in messages), messages
    assert not any("no resources specified" in m for m in messages), messages
