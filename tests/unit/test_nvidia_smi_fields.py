"""The ``--query-gpu`` field table agrees with what the real tool accepted, one name at a time, on every machine.

``query-each.tsv`` holds every name ``--help-query-gpu`` lists, queried alone: its header (canonical name and unit)
or the refusal. The simulator must accept exactly the accepted names, print each under the same header, and an
idle value it keeps from the recordings must be the value every GPU printed.
"""

from __future__ import annotations

import nvidia_smi_factories as f
import pytest

from cluster.gpu.nvidia_smi import _fields as fields
from cluster.gpu.nvidia_smi import _query as query

pytestmark = pytest.mark.unit


def recorded(machine: str) -> dict[str, tuple[str, str]]:
    """name -> (header line, value or error) for every name the help lists."""
    out = {}
    for line in (f.FIXTURES / machine / "query-each.tsv").read_text().splitlines():
        name, rest = line.split("\t", 1)
        header, _, value = rest.partition("|")
        out[name] = (header, value)
    return out


@pytest.mark.parametrize("machine", f.MACHINES)
def test_accepted_names_and_headers(machine: str) -> None:
    for name, (header, value) in recorded(machine).items():
        field = fields.lookup(name)
        if header == query.bad_field(name).strip():
            assert field is None, name
            continue
        assert field is not None, name
        assert field.name + (f" [{field.unit}]" if field.unit else "") == header
        if field.idle is not None:  # one value per GPU, joined with |
            assert set(value.split("|")) == {query.value(field, {}, units=True)}, name


def test_every_recorded_field_is_in_the_table_once() -> None:
    names = [n for n, (h, _) in recorded("h100-80gb-hbm3-x1").items() if not h.startswith("Field ")]
    assert sorted(fields.BY_NAME) == sorted(set(names))
    assert len(fields.CANONICAL) == len({h.split(" [")[0] for n, (h, _) in recorded("h200-x4").items()
                                         if not h.startswith("Field ")})  # fmt: skip
