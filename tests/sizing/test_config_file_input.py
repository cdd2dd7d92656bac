"""A model's config.json is untrusted input like a workload file: bounded, UTF-8, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferstack.errors import InputError
from inferstack.sizing.architecture import read_config_file


@pytest.mark.parametrize(("content", "message"), [
    ("[" * 100_000 + "]" * 100_000, "nests deeper than"),
    (b"\xff\xfe{}", "UTF-8"),
    ("{" + '"a": 1, ' * 300_000 + '"b": 2}', "larger than"),
    ("[1, 2]", "must be a JSON object"),
    ("{not json", "cannot be parsed"),
])
def test_a_hostile_config_json_is_refused_naming_the_field(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = tmp_path / "model" / "config.json"
    path.parent.mkdir()
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(InputError, match=message) as raised:
        read_config_file(path)
    assert [problem.field for problem in raised.value.problems] == ["model.config"]


def test_a_directory_is_not_a_config_json(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        read_config_file(tmp_path)
