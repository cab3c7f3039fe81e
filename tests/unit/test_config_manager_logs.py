"""The config-manager sidecar's lines for one turn of its loop (``cluster.sim.gpu.cmlogs``), as k8s-device-plugin
v0.19.1's ``cmd/config-manager/main.go`` prints them under the GPU Operator's settings: the label, the default, the
operator's ``empty`` fallback, an unchanged config, and the error the sidecar exits with."""

from __future__ import annotations

from cluster.gpu import config_manager
from cluster.sim.gpu import cmlogs, startlogs

LABEL = "nvidia.com/device-plugin.config"
DATA = {"whole": "version: v1\n", "x2": "version: v1\n"}


def _texts(lines: tuple[startlogs.Line, ...]) -> list[str]:
    return [f"{line.level[0].upper()} {line.source.rsplit('/', 1)[-1]}] {line.text}" for line in lines]


def _turn(label: str | None, default: str | None, previous: str | None) -> list[str]:
    selection = config_manager.select_config(DATA, label, default, cmlogs.FALLBACKS)
    return _texts(cmlogs.label_change("device-plugin", label, default, selection, previous))


def test_a_new_label_switches_the_config_and_signals_the_plugin() -> None:
    assert _turn("x2", "whole", "whole") == [
        f"I main.go:249] Label change detected: {LABEL}=x2",
        "I main.go:305] Updating to config: x2",
        "I main.go:320] Successfully updated to config: x2",
        "I main.go:324] Sending signal 'hangup' to 'nvidia-device-plugin'",
        "I main.go:329] Successfully sent signal",
        f"I main.go:247] Waiting for change to '{LABEL}' label",
    ]


def test_the_same_config_is_skipped_and_an_empty_label_takes_the_default() -> None:
    assert _turn(None, "whole", "whole") == [
        f"I main.go:249] Label change detected: {LABEL}=",
        "I main.go:361] No value set. Selecting default name: whole",
        "I main.go:305] Updating to config: whole",
        "I main.go:313] Already configured. Skipping update...",
        f"I main.go:247] Waiting for change to '{LABEL}' label",
    ]


def test_no_label_and_no_default_fall_back_to_the_empty_config() -> None:
    assert _turn(None, None, "x2") == [
        f"I main.go:249] Label change detected: {LABEL}=",
        "I main.go:369] No value set and no default set. Attempting fallback strategies: [empty]",
        "I main.go:385] Falling back to an empty configuration",
        "I main.go:303] Updating to empty config",
        "I main.go:318] Successfully updated to empty config",
        "I main.go:324] Sending signal 'hangup' to 'nvidia-device-plugin'",
        "I main.go:329] Successfully sent signal",
        f"I main.go:247] Waiting for change to '{LABEL}' label",
    ]


def test_a_label_naming_no_config_is_the_error_the_sidecar_exits_with() -> None:
    assert _turn("nope", "whole", "whole") == [
        f"I main.go:249] Label change detected: {LABEL}=nope",
        "E main.go:209] specified config nope does not exist",
    ]
    gfd = cmlogs.label_change("gpu-feature-discovery", "x2", None, config_manager.Selection(name="x2"), None)
    assert "Sending signal 'hangup' to 'gpu-feature-discovery'" in [line.text for line in gfd]
