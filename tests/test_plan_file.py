"""A plan given as data or a file (`inferstack plan --json`): read strictly, because its values reach boot scripts,
unit files, URLs and paths on the server. A key the plan models do not know is refused, never ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferstack.errors import InputError
from inferstack.plan_file import load_plan, read_plan
from tests.sample_plans import sample_plan


def test_a_plan_with_an_unknown_key_is_refused_naming_the_key() -> None:
    data = sample_plan("aws").model_dump(mode="json")
    data["serving"]["run_as_root"] = True
    with pytest.raises(InputError) as refused:
        read_plan(data, "aws", source="plan.json")
    assert "plan.serving.run_as_root" in str(refused.value)


def test_a_report_with_an_unknown_key_in_its_chosen_plan_is_refused(tmp_path: Path) -> None:
    plan = sample_plan("aws")
    report = json.loads((Path(__file__).parents[1] / "examples" / "aws-existing-vpc" / "plan.json").read_text())
    report["clouds"][0]["chosen"]["extra_servers"] = 3
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(report))
    with pytest.raises(InputError, match="extra_servers"):
        load_plan(path, "aws")
    path.write_text(plan.model_dump_json())
    assert load_plan(path, "aws") == plan
