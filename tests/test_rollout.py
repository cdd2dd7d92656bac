"""A model revision in the workload, and the rollout it starts: refused unless it has a revision's shape, the files'
own prefix in the bucket, the plan's rollout (servers × cold start ÷ surge) in `plan` and `plan --json`, and the
`inferstack diff` line that calls the change a rollout.

Each cloud's rolling machinery is tested under mocks in tests/components/test_rollout_fleet.py.
"""

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferstack.cli import main
from inferstack.clouds import CLOUD_FACTS
from inferstack.diff import diff_workload_files, render_markdown
from inferstack.errors import InputError
from inferstack.plan import ROLLOUT_SURGE_FRACTION, Fleet, rollout_for
from inferstack.sizing.planner import plan_workload
from inferstack.spec import load_workload, parse_workload

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workloads" / "chat-8b-public.yaml"
SHA = "0e9e39f249a16976918f6564b8830bc894c89659"  # the shape of a Hugging Face commit


def workload(revision: str | None = None, **changes: Any) -> dict[str, Any]:
    """The public chat example, its model given with a revision, and `changes` over it."""
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["model"] = {"registry": data["model"], **({"revision": revision} if revision is not None else {})}
    return {**data, **changes}


def write(directory: Path, name: str, data: dict[str, Any]) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


#### The workload field ####


@pytest.mark.parametrize("revision", [SHA, "r2", "v1.2", "2026-11-30", "release_7"])
def test_a_hub_commit_or_a_version_label_is_a_revision(revision: str) -> None:
    assert parse_workload(workload(revision)).model_revision == revision


@pytest.mark.parametrize("revision", [SHA.upper(), "../models", "r 2", "r2/../../etc", "$(reboot)", "r2;ls", "",
                                      "-r2", ".hidden", "a" * 41, "r2\n"])
def test_anything_else_is_refused_naming_the_field_the_value_and_the_fix(revision: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_workload(workload(revision))
    message = str(caught.value)
    assert "model.revision" in message and "Hugging Face commit" in message, message


def test_a_model_without_a_revision_keeps_its_unversioned_prefix() -> None:
    assert parse_workload(workload()).model_revision is None


#### The plan ####


@pytest.fixture(scope="module")
def report_r2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = write(tmp_path_factory.mktemp("r2"), "chat.yaml", workload("r2"))
    return plan_workload(load_workload(path))


def test_the_servers_load_the_files_under_the_revisions_own_prefix(report_r2: Any) -> None:
    for outcome in report_r2.clouds:
        model = outcome.chosen.model
        assert model.revision == "r2"
        assert model.bucket_prefix == f"models/llama-3.1-8b/{outcome.chosen.precision}/r2/"
        # what the servers' identity may read: every revision, so that a new one changes no grant
        assert model.revisions_prefix == f"models/llama-3.1-8b/{outcome.chosen.precision}/"


def test_a_production_fleet_rolls_with_surge_and_states_how_long_it_takes(report_r2: Any) -> None:
    for outcome in report_r2.clouds:
        plan = outcome.chosen
        rollout, fleet = plan.rollout, plan.fleet
        assert rollout is not None and fleet is not None
        assert rollout.strategy == "rolling" and rollout.min_healthy_percent == 100
        assert rollout.servers == fleet.min_replicas
        assert plan.zones <= rollout.surge <= rollout.servers
        assert rollout.batches == math.ceil(rollout.servers / rollout.surge)
        assert rollout.duration_s == rollout.batches * fleet.cold_start_s
        line = next(r for r in plan.rationale if r.startswith("Rollout"))
        assert "now model revision r2" in line and f"about {_minutes(rollout.duration_s)}" in line, line
        if outcome.cloud in ("aws", "gcp"):
            assert f"surge {rollout.surge}" in line and f"never fewer than {rollout.servers} serving" in line
        else:
            assert "does not replace running servers by itself" in line and "by raising the group's size" in line
            assert ("`inferstack rollout STACK` replaces them" in line) is CLOUD_FACTS[outcome.cloud].rollout_command


def _minutes(seconds: int) -> str:
    return f"{seconds / 60:.1f} min" if seconds % 60 else f"{seconds // 60} min"


def test_the_surge_is_a_quarter_of_the_servers_and_at_least_one_a_zone() -> None:
    def fleet(servers: int) -> Fleet:
        return Fleet(min_replicas=servers, max_replicas=2 * servers, target_requests_per_s=1.0, cold_start_s=600,
                     health_check_grace_s=900, scale_out_cooldown_s=600, scale_in_cooldown_s=1200)

    assert ROLLOUT_SURGE_FRACTION == 0.25
    five = rollout_for(5, 2, fleet(5), 600)
    assert (five.surge, five.batches, five.duration_s) == (2, 3, 1800)
    twelve = rollout_for(12, 3, fleet(12), 600)
    assert (twelve.surge, twelve.batches, twelve.duration_s) == (3, 4, 2400)
    forty = rollout_for(40, 2, fleet(40), 600)
    assert (forty.surge, forty.batches, forty.duration_s) == (10, 4, 2400)
    two = rollout_for(2, 2, fleet(2), 600)
    assert (two.surge, two.batches, two.min_healthy_percent) == (2, 1, 100)


def test_one_server_is_replaced_delete_first_and_the_plan_says_it_is_down_meanwhile(tmp_path: Path) -> None:
    small = workload("r2", stage="validation", traffic={"concurrent_users": 2})
    report = plan_workload(load_workload(write(tmp_path, "chat.yaml", small)))
    for outcome in report.clouds:
        plan = outcome.chosen
        assert plan.fleet is None and plan.rollout is not None
        assert (plan.rollout.strategy, plan.rollout.surge, plan.rollout.min_healthy_percent) == ("replace", 0, 0)
        assert plan.rollout.duration_s >= plan.cold_start.total_s
        assert any("replaced delete-first" in r and "down" in r and "protect_servers" in r for r in plan.rationale)


def test_plan_json_and_the_table_carry_the_rollout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "chat.yaml", workload("r2"))
    assert main(["plan", str(path), "--json", "--cloud", "gcp"]) == 0
    (outcome,) = json.loads(capsys.readouterr().out)["clouds"]
    rollout = outcome["chosen"]["rollout"]
    assert rollout["strategy"] == "rolling" and rollout["duration_s"] == (
        rollout["batches"] * outcome["chosen"]["fleet"]["cold_start_s"])
    assert main(["plan", str(path), "--cloud", "gcp"]) == 0
    table = capsys.readouterr().out
    minutes = math.ceil(rollout["duration_s"] / 60)
    assert f"{rollout['servers']} by {rollout['surge']}, ~{minutes} min" in table


#### The diff ####


def test_a_new_revision_is_a_rollout_on_every_cloud_at_no_cost(tmp_path: Path) -> None:
    base = write(tmp_path, "base/chat.yaml", workload("r1"))
    head = write(tmp_path, "head/chat.yaml", workload("r2"))
    diff = diff_workload_files([base, head])
    assert [(c.field, c.before, c.after) for c in diff.workload_changes] == [("model.revision", "r1", "r2")]
    head_plans = {o.cloud: o.chosen for o in plan_workload(load_workload(head)).clouds}
    for cloud in diff.clouds:
        rollout = head_plans[cloud.cloud].rollout
        assert rollout is not None
        minutes = math.ceil(rollout.duration_s / 60)
        assert cloud.status == "changed" and cloud.monthly_cost.delta in (None, 0)
        assert cloud.rollout is not None and cloud.rollout.startswith("Rollout: model revision r1 → r2")
        if cloud.cloud in ("aws", "gcp"):
            assert cloud.rollout.endswith(f"{rollout.servers} servers replaced with surge {rollout.surge}, about "
                                          f"{minutes} minutes")
        else:  # no rolling update there: the diff says the running servers stay until replaced by hand
            assert "does not replace the" in cloud.rollout and f"surge {rollout.surge}" in cloud.rollout
    assert render_markdown(diff).count("**Rollout: model revision r1 → r2") == 4


def test_a_change_that_keeps_the_servers_is_no_rollout(tmp_path: Path) -> None:
    base = write(tmp_path, "base/chat.yaml", workload("r1"))
    head = write(tmp_path, "head/chat.yaml", workload("r1", scaling={"max_replicas": 20}))
    diff = diff_workload_files([base, head])
    assert diff.workload_changes and all(cloud.rollout is None for cloud in diff.clouds)
