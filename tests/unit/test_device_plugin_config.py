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
