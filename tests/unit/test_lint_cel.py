"""DRA CEL selectors: the celcheck runner (real Kubernetes compiler) and the static attribute/type checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster import errors
from cluster.gpu import cel
from graders import cel_static, lint
from prerequisites import require


@pytest.fixture
def celcheck_built() -> None:
    require(cel.find_binary() is not None, "celcheck is not built: run `gpulab binaries ensure`")


needs_celcheck = pytest.mark.usefixtures("celcheck_built")


@needs_celcheck
def test_compiler_accepts_verified_idioms_and_quotes_apiserver_errors() -> None:
    good = [
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'",
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')",
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))",
    ]
    bad = ("device.driver = 'x'", "spec.selectors[0].cel.expression")
    verdicts = cel.check([(e, "expression") for e in good] + [bad])
    assert [v.ok for v in verdicts] == [True] * len(good) + [False]
    assert verdicts[-1].error.startswith('spec.selectors[0].cel.expression: Invalid value: "device.driver = \'x\'": '
                                         "compilation failed: ERROR: <input>:1:")


@needs_celcheck
def test_compiler_rejects_non_bool_and_type_errors() -> None:
    verdicts = cel.check([("1 + 1", "e"), ("device.capacity['gpu.nvidia.com'].memory > 4", "e")])
    assert "must evaluate to bool" in verdicts[0].error
    assert "found no matching overload" in verdicts[1].error


def test_missing_binary_raises_a_course_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPULAB_CELCHECK", str(tmp_path / "nope"))
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("GPULAB_BIN_DIR", raising=False)
    assert cel.find_binary() is None
    with pytest.raises(errors.BinariesUnavailable, match="celcheck"):
        cel.check([("true", "e")])


def test_lint_without_binary_says_cel_was_not_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPULAB_CELCHECK", str(tmp_path / "nope"))
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("GPULAB_BIN_DIR", raising=False)
    text = ("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: d}\nspec:\n  selectors:\n"
            "  - cel: {expression: \"device.attributes['gpu.nvidia.com'].index == 0\"}\n")
    result = lint.lint_texts({"d.yaml": text})
    messages = [f.message for f in result.findings if f.rule == "dra-cel"]
    assert any(m.startswith("CEL not checked: the celcheck helper is not installed") for m in messages)
    # the static checks read cel-go's syntax tree, so without celcheck they say they did not run (no regex guess)
    assert any("the attribute and type checks need it too, so they did not run" in m for m in messages)
    assert not any("stopped publishing `index`" in m for m in messages)


def test_crashing_binary_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "celcheck"
    fake.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    os.chmod(fake, 0o755)
    monkeypatch.setenv("GPULAB_CELCHECK", str(fake))
    with pytest.raises(errors.CommandFailed):
        cel.check([("true", "e")])
    text = ("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: d}\nspec:\n  selectors:\n"
            "  - cel: {expression: \"device.driver == 'gpu.nvidia.com'\"}\n")
    result = lint.lint_texts({"d.yaml": text})
    assert any("celcheck helper failed" in f.message for f in result.findings)


@needs_celcheck
@pytest.mark.parametrize("expression,key", [
    ("device.attributes['gpu.nvidia.com'].index == 0", "dra-cel/removed-attribute"),
    ("device.attributes['gpu.nvidia.com'].prodName == 'x'", "dra-cel/unknown-attribute"),
    ("device.attributes['gpu.nvidia.com'].memory > 1", "dra-cel/capacity-as-attribute"),
    ("device.capacity['gpu.nvidia.com'].productName == 'x'", "dra-cel/attribute-as-capacity"),
    ("device.capacity['gpu.nvidia.com'].vram.isGreaterThan(quantity('1Gi'))", "dra-cel/unknown-capacity"),
    ("device.attributes['nvidia.com'].type == 'gpu'", "dra-cel/unknown-domain"),
    ("device.attributes['gpu.nvidia.com'].driverVersion >= '550.0.0'", "dra-cel/version-vs-string"),
    ("'8.0.0' < device.attributes['gpu.nvidia.com'].cudaComputeCapability", "dra-cel/version-vs-string"),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo('8.0.0') > 0", "dra-cel/version-vs-string"),
    ("device.capacity['gpu.nvidia.com'].memory >= 40", "dra-cel/capacity-vs-literal"),
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40GB')) >= 0", "dra-cel/bad-quantity"),
    ("device.attributes['gpu.nvidia.com'].driverVersion.isLessThan(semver('550'))", "dra-cel/bad-semver"),
    ("device.attributes['gpu.nvidia.com'].type == 'GPU'", "dra-cel/unknown-type-value"),
    ("device.driver == 'nvidia.com/gpu'", "dra-cel/unknown-driver"),
    ("device.attributes[\"gpu.nvidia.com\"][\"index\"] == 0", "dra-cel/removed-attribute"),
    ("device.attributes['resource.kubernetes.io'].pciBusId == 'x'", "dra-cel/unknown-attribute"),
])
def test_static_checks(expression: str, key: str) -> None:
    assert key in [issue.key for issue in cel_static.analyse(expression)]


@needs_celcheck
@pytest.mark.parametrize("expression", [
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))",
    "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550', true)) >= 0",
    "device.attributes['gpu.example.com'].index == 0 && device.capacity['gpu.example.com'].compute.isInteger()",
    "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'",
    "has(device.attributes['gpu.nvidia.com'].addressingMode)",
    "device.attributes['gpu.nvidia.com'].type == 'mig' && device.capacity['gpu.nvidia.com'].memorySlice3.isInteger()",
    "'unterminated",
    "))))((((",
])
def test_static_checks_stay_quiet_on_correct_or_unparseable_input(expression: str) -> None:
    assert cel_static.analyse(expression) == []


# Cases a token-pattern reading of CEL got wrong; the syntax tree from cel-go's parser gets them right.
@needs_celcheck
@pytest.mark.parametrize("expression,key", [
    # parentheses hide the comparison from a token window
    ("(device.attributes['gpu.nvidia.com'].driverVersion) >= '550.0.0'", "dra-cel/version-vs-string"),
    ("semver(('550'))", "dra-cel/bad-semver"),
    # escapes in a string literal are CEL's to decode: this is the NVIDIA domain
    ("device.attributes['gpu.nvidia\\x2ecom'].index == 0", "dra-cel/removed-attribute"),
    # inside nested macros
    ("['a'].all(x, ['b'].exists(y, (device.capacity['gpu.nvidia.com'].memory) >= 40))",
     "dra-cel/capacity-vs-literal"),
    ("'nvidia.com/gpu' == device.driver", "dra-cel/unknown-driver"),
])
def test_static_checks_read_the_syntax_tree(expression: str, key: str) -> None:
    assert key in [issue.key for issue in cel_static.analyse(expression)]


@needs_celcheck
@pytest.mark.parametrize("expression", [
    # the literal compared is compareTo's result, not the capacity
    "0 < device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1Gi'))",
    # operators and accesses inside a string are text, not CEL
    "device.attributes['gpu.nvidia.com'].productName == \"device.attributes['gpu.nvidia.com'].index == 0\"",
    "device.attributes['gpu.nvidia.com'].productName == 'x) || semver(\\'1\\')'",
])
def test_static_checks_ignore_what_only_looks_like_cel(expression: str) -> None:
    assert cel_static.analyse(expression) == []


@needs_celcheck
def test_hostile_expressions_get_a_parser_message_within_the_budget() -> None:
    import time
    deep = "(" * 5000 + "true" + ")" * 5000
    wide = " && ".join(["device.attributes['gpu.nvidia.com'].index == 0"] * 150)
    nested = "!" * 3000 + "true"
    started = time.monotonic()
    parsed = cel.parse([deep, nested, "'unterminated", wide[: cel_static.MAX_CHARS]])
    assert time.monotonic() - started < cel.PARSE_TIMEOUT_S
    assert parsed[0].tree is None and "recursion limit" in parsed[0].error
    assert parsed[2].tree is None and "Syntax error" in parsed[2].error
    assert parsed[3].tree is not None
    assert cel_static.analyse(deep) == [] and cel_static.analyse("'unterminated") == []
    assert len(cel_static.analyse(wide[: cel_static.MAX_CHARS])) >= 100
