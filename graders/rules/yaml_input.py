"""Rules found while reading a file, before any manifest rule runs (emitted by ``graders.source``).

They are listed here so that every rule id has one documented home and fixtures like the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

RULES: Mapping[str, str] = MappingProxyType({
    "yaml-syntax": "The file is YAML that a Kubernetes client can read: valid syntax, defined aliases, plain keys.",
    "input-limits": "The file stays within the reading limits (size, nesting depth, values after alias expansion, "
                    "documents), so a hostile file such as a 'billion laughs' bomb is refused in milliseconds.",
    "input-encoding": "The file is UTF-8 text: no NUL bytes, no invalid byte sequences, no control characters.",
    "yaml-duplicate-key": "No key appears twice in one mapping, where only one value could take effect.",
    "yaml-tag": "No YAML tags: Kubernetes ignores them and gpulab never constructs tagged objects.",
})
