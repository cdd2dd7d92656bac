"""`inferstack diff`: what a workload change does to each cloud's deployment, as a PR comment and as JSON.

Every pair is a realistic edit of examples/workloads/chat-8b-public.yaml. Expected figures are read from the
two plans the planner makes for the pair (so a catalog refresh does not break these tests), and the diff's
arithmetic, rounding and wording are checked against them line by line.
"""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from git_repo import git

from inferstack.cli import main
from inferstack.diff import PlanDiff, diff_reports, diff_workload_files, render_markdown
from inferstack.errors import InputError
from inferstack.pin import PinnedPlan
from inferstack.plan import DeploymentPlan, PlanReport
from inferstack.sizing.planner import plan_workload
from inferstack.spec import load_workload

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "workloads" / "chat-8b-public.yaml"


def edited(**changes: Any) -> dict[str, Any]:
    """The example workload with `section__field=value` edits, as a reviewer would make them."""
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return data


def write(directory: Path, name: str, data: dict[str, Any]) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def diff_pair(tmp_path: Path, head: dict[str, Any], base: dict[str, Any] | None = None) -> PlanDiff:
    base_file = write(tmp_path, "base/chat.yaml", base or edited())
    head_file = write(tmp_path, "head/chat.yaml", head)
    return diff_workload_files([base_file, head_file])


def plans(data: dict[str, Any], tmp_path: Path) -> PlanReport:
    return plan_workload(load_workload(write(tmp_path, "plans/chat.yaml", data)))


def cloud(diff: PlanDiff, name: str) -> Any:
    return next(c for c in diff.clouds if c.cloud == name)


def money(amount: float) -> str:
    return f"{amount:,.2f}"


def chosen(report: PlanReport, name: str) -> DeploymentPlan:
    plan = report.outcome(name).chosen  # type: ignore[arg-type]
    assert plan is not None
    return plan


# ---- realistic pairs ----------------------------------------------------------------------------------


def test_an_unchanged_workload_reports_no_change(tmp_path):
    data = edited()
    head = write(tmp_path, "head/chat.yaml", data)
    head.write_text("# reworded comment only\n" + head.read_text())

    diff = diff_workload_files([write(tmp_path, "base/chat.yaml", data), head])
    markdown = render_markdown(diff)

    assert diff.changed is False
    assert diff.workload_changes == []
    assert {c.status for c in diff.clouds} == {"unchanged"}
    assert "**No change** to any deployment" in markdown
    best = plans(data, tmp_path).best
    assert best is not None
    assert f"**Best overall**: {best.summary()} (unchanged)" in markdown
    assert "####" not in markdown  # no per-cloud sections when nothing changed


def test_three_times_the_users_scales_out_every_cloud_and_prices_the_difference(tmp_path):
    base, head = plans(edited(), tmp_path), plans(edited(traffic__concurrent_users=300), tmp_path)
    diff = diff_pair(tmp_path, edited(traffic__concurrent_users=300))
    markdown = render_markdown(diff)

    assert "| `traffic.concurrent_users` | 100 | 300 |" in markdown
    assert diff.workload_changes[0].delta == 200
    old, new = chosen(base, "aws"), chosen(head, "aws")
    assert new.instance_count > old.instance_count and new.offer == old.offer
    extra = new.instance_count - old.instance_count
    assert f"| instances | {old.instance_count} | {new.instance_count} | +{extra} |" in markdown
    # same instance type: the cost grows by exactly the extra instances at the same hourly price
    assert old.price.monthly_ranking and new.price.monthly_ranking and old.price.hourly_per_instance
    delta = round(new.price.monthly_ranking.amount, 2) - round(old.price.monthly_ranking.amount, 2)
    assert delta == pytest.approx(extra * old.price.hourly_per_instance.amount * 730, abs=0.02)
    percent = f"{delta / old.price.monthly_ranking.amount * 100:+,.1f}%"
    row = (
        f"| aws | {old.instance_count}x {old.offer} (1x {old.accelerator.id}), {old.region} "  # type: ignore[union-attr]
        f"| {new.instance_count}x {new.offer} (1x {new.accelerator.id}), {new.region} "  # type: ignore[union-attr]
        f"| {money(old.price.monthly_ranking.amount)} → {money(new.price.monthly_ranking.amount)} "
        f"| +{money(delta)} ({percent}) |"
    )
    assert row in markdown
    assert all(c.status == "changed" for c in diff.clouds)


def test_a_startup_change_is_never_no_change_and_only_the_image_or_loading_rolls_the_servers(tmp_path):
    baked = render_markdown(diff_pair(tmp_path, edited(startup={"image": "baked", "model_loading": "stream"})))
    assert "**No change**" not in baked
    assert "| server image | default | baked |" in baked and "| model loading | download | stream |" in baked
    assert "| runtime caches in the image | no | yes |  |" in baked  # a yes/no, no +1
    assert "Rollout: server startup" in baked  # a new image and a new boot: the template changes
    pooled = diff_pair(tmp_path, edited(startup={"warm_pool": True}))
    aws = cloud(pooled, "aws")
    assert aws.status == "changed" and aws.rollout is None  # the pool is the group's, the servers stay
    labels = {change.label for change in aws.changes}
    assert {"warm pool (stopped servers)", "start from the warm pool (s)", "scale-out warm-up (s)"} <= labels


def test_a_longer_context_raises_the_sequence_limit_and_the_kv_cache(tmp_path):
    longer = edited(traffic__context_tokens=32768, traffic__prompt_tokens={"mean": 6000, "p95": 24000})
    base, head = plans(edited(), tmp_path), plans(longer, tmp_path)
    diff = diff_pair(tmp_path, longer)
    markdown = render_markdown(diff)

    assert "| `traffic.context_tokens` | 8192 | 32768 |" in markdown
    assert "| `traffic.prompt_tokens.p95` | 2000 | 24000 |" in markdown
    aws = cloud(diff, "aws")
    by_field = {c.field: c for c in aws.changes}
    assert (by_field["serving.max_model_len"].before, by_field["serving.max_model_len"].after) == (8192, 32768)
    assert "| max sequence (tokens) | 8,192 | 32,768 | +24,576 |" in markdown
    old, new = chosen(base, "aws"), chosen(head, "aws")
    assert by_field["price.monthly_ranking"].delta == pytest.approx(
        round(new.price.monthly_ranking.amount, 2) - round(old.price.monthly_ranking.amount, 2)  # type: ignore[union-attr]
    )
    assert by_field["price.monthly_ranking"].delta > 0  # more context never gets cheaper


def test_int4_weights_shrink_the_memory_per_device(tmp_path):
    base, head = plans(edited(), tmp_path), plans(edited(precision="int4-awq"), tmp_path)
    diff = diff_pair(tmp_path, edited(precision="int4-awq"))
    markdown = render_markdown(diff)

    assert "| `precision` | bf16 | int4-awq |" in markdown
    old, new = chosen(base, "aws"), chosen(head, "aws")
    assert new.memory.weights_gib < old.memory.weights_gib / 2
    shrink = round(new.memory.weights_gib, 1) - round(old.memory.weights_gib, 1)
    row = f"| weights per device (GiB) | {old.memory.weights_gib:.1f} | {new.memory.weights_gib:.1f} | {shrink:+.1f} |"
    assert row in markdown
    assert "| precision | bf16 | int4-awq |  |" in markdown


def test_a_region_move_shows_the_region_and_the_warnings_it_brings(tmp_path):
    moved = edited(placement__regions={"aws": ["ca-central-1"], "alibaba": ["cn-hangzhou"]})
    base, head = plans(edited(), tmp_path), plans(moved, tmp_path)
    diff = diff_pair(tmp_path, moved)
    markdown = render_markdown(diff)

    assert "| `placement.regions.aws` | – | ca-central-1 |" in markdown
    assert "| region | us-east-1 | ca-central-1 |  |" in markdown
    assert "| region | ap-southeast-1 | cn-hangzhou |  |" in markdown
    assert cloud(diff, "gcp").status == "unchanged"
    for name in ("aws", "alibaba"):
        expected = [w for w in chosen(head, name).warnings if w not in chosen(base, name).warnings]
        assert cloud(diff, name).warnings_added == expected
    # no price source lists ca-central-1: it borrows us-east-1's price, and the diff says so
    assert cloud(diff, "aws").warnings_added, "expected the regional-substitute warning for ca-central-1"
    section = markdown.split("#### aws: changed")[1].split("####")[0]
    assert "**New warnings**" in section and "ca-central-1" in section
    cleared = cloud(diff, "alibaba").warnings_cleared
    assert cleared == [w for w in chosen(base, "alibaba").warnings if w not in chosen(head, "alibaba").warnings]


def test_allowing_only_l40s_makes_the_clouds_without_it_infeasible_with_their_blockers(tmp_path):
    only_l40s = edited(placement__gpus_allow=["L40S"])
    head = plans(only_l40s, tmp_path)
    diff = diff_pair(tmp_path, only_l40s)
    markdown = render_markdown(diff)

    assert cloud(diff, "aws").status == "unchanged"
    for name in ("gcp", "alibaba", "huawei"):
        lost = cloud(diff, name)
        assert lost.status == "became_infeasible"
        assert lost.after is None and lost.blocked_after == head.outcome(name).blocked_by
        assert lost.warnings_cleared == []  # the gone deployment's warnings are not news
        section = markdown.split(f"#### {name}: became infeasible")[1].split("####")[0]
        assert "**Blocked by**" in section
        assert all(f"- {reason}" in section for reason in lost.blocked_after)
    assert any("excluded by placement.gpus_allow" in r for r in cloud(diff, "gcp").blocked_after)
    assert "| gcp |" in markdown and "| none feasible |" in markdown and "**became infeasible** |" in markdown


def test_the_reverse_change_makes_them_feasible_and_says_what_blocked_them(tmp_path):
    diff = diff_pair(tmp_path, edited(), base=edited(placement__gpus_allow=["L40S"]))
    markdown = render_markdown(diff)

    gcp = cloud(diff, "gcp")
    assert gcp.status == "became_feasible" and gcp.before is None and gcp.after is not None
    section = markdown.split("#### gcp: became feasible")[1].split("####")[0]
    assert "**Was blocked by**" in section


def test_a_head_with_nothing_feasible_lists_the_nearest_feasible_changes(tmp_path):
    cpu_only = edited(placement__device="cpu")
    head = plans(cpu_only, tmp_path)
    diff = diff_pair(tmp_path, cpu_only)
    markdown = render_markdown(diff)

    assert {c.status for c in diff.clouds} == {"became_infeasible"}
    assert diff.best.after is None
    assert "→ none feasible" in markdown.split("**Best overall**")[1].splitlines()[0]
    assert head.suggestions and diff.suggestions == head.suggestions
    assert "**Nearest feasible changes**" in markdown
    assert all(f"- {s}" in markdown for s in head.suggestions)


def test_a_new_ranking_currency_converts_base_costs_at_the_head_rates(tmp_path):
    base, head = plans(edited(), tmp_path), plans(edited(placement__currency="EUR"), tmp_path)
    diff = diff_pair(tmp_path, edited(placement__currency="EUR"))
    markdown = render_markdown(diff)

    aws = cloud(diff, "aws")
    usd = chosen(base, "aws").price.monthly_ranking
    assert usd is not None and usd.currency == "USD"
    assert aws.monthly_cost.before == round(usd.amount * head.exchange_rates["USD"], 2)
    assert aws.monthly_cost.before == aws.monthly_cost.after  # same deployment: same cost, just in EUR
    assert "Costs per month in EUR (base costs converted from USD at the head's exchange rates)" in markdown
    assert "| cloud | base | head | EUR/month | change |" in markdown


def test_the_list_price_is_shown_in_the_currency_the_cloud_bills(tmp_path):
    base, head = plans(edited(), tmp_path), plans(edited(traffic__concurrent_users=300), tmp_path)
    diff = diff_pair(tmp_path, edited(traffic__concurrent_users=300))

    old, new = chosen(base, "alibaba").price.monthly, chosen(head, "alibaba").price.monthly
    assert old is not None and new is not None and old.currency == new.currency != "USD"
    row = next(c for c in cloud(diff, "alibaba").changes if c.field == "price.monthly")
    assert row.label == f"list price per month ({old.currency})"
    assert row.delta == pytest.approx(round(new.amount, 2) - round(old.amount, 2))
    assert f"| list price per month ({old.currency}) | {money(old.amount)} | {money(new.amount)} |" in render_markdown(
        diff
    )


def test_the_json_diff_carries_numbers_and_round_trips(tmp_path):
    diff = diff_pair(tmp_path, edited(traffic__concurrent_users=300))
    data = json.loads(json.dumps(diff.model_dump(mode="json")))

    assert data["workload"] == "chat-8b" and data["changed"] is True and data["currency"] == "USD"
    aws = next(c for c in data["clouds"] if c["cloud"] == "aws")
    instances = next(c for c in aws["changes"] if c["field"] == "instance_count")
    assert instances["delta"] == instances["after"] - instances["before"] > 0
    assert aws["monthly_cost"]["unit"] == "USD"
    assert aws["monthly_cost"]["delta"] == pytest.approx(aws["monthly_cost"]["after"] - aws["monthly_cost"]["before"])
    assert PlanDiff.model_validate(data) == diff


def test_the_comment_starts_with_a_heading_naming_the_workload_and_file(tmp_path):
    diff = diff_pair(tmp_path, edited(traffic__concurrent_users=300))
    head_file = tmp_path / "head" / "chat.yaml"

    assert render_markdown(diff).splitlines()[0] == f"### inferstack plan diff: `chat-8b` (`{head_file}`)"


def test_values_that_print_the_same_are_not_changes(tmp_path):
    planned = plans(edited(), tmp_path)
    plan = chosen(planned, "aws")

    def with_ttft(ms: float) -> PlanReport:  # both sides away from a rounding edge: 242.20 and 242.21 print alike
        moved = plan.model_copy(update={"performance": plan.performance.model_copy(update={"ttft_p95_ms": ms})})
        outcome = planned.outcome("aws").model_copy(update={"chosen": moved})
        return planned.model_copy(update={"clouds": [outcome if o.cloud == "aws" else o for o in planned.clouds]})

    whole = int(plan.performance.ttft_p95_ms)
    base, head = with_ttft(whole + 0.2), with_ttft(whole + 0.21)

    assert cloud(diff_reports(base, head), "aws").status == "unchanged"


# ---- stack files with an inline workload ----------------------------------------------------------------

STACK = Path(__file__).resolve().parents[1] / "stacks" / "Pulumi.aws-prod.yaml"


def stack_file(directory: Path, name: str, **workload_changes: Any) -> Path:
    """A copy of the aws-prod stack, with edits to its inline workload (`traffic__concurrent_users=...`)."""
    data = yaml.safe_load(STACK.read_text())
    for dotted, value in workload_changes.items():
        *parents, leaf = dotted.split("__")
        node = data["config"]["inferstack:workload"]
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return write(directory, f"{name}/Pulumi.aws-prod.yaml", data)


def test_a_stack_file_is_sized_on_its_cloud_and_stage_like_the_pulumi_program(tmp_path):
    diff = diff_workload_files(
        [stack_file(tmp_path, "base"), stack_file(tmp_path, "head", traffic__concurrent_users=150)]
    )

    stack = yaml.safe_load(STACK.read_text())["config"]
    assert [c.cloud for c in diff.clouds] == [stack["inferstack:cloud"]]
    assert [(c.field, c.before, c.after) for c in diff.workload_changes] == [("traffic.concurrent_users", 100, 150)]
    assert diff.clouds[0].status == "changed"


def test_a_stack_region_change_moves_the_plan_to_that_region(tmp_path):
    data = yaml.safe_load(STACK.read_text())
    data["config"]["aws:region"] = "eu-west-1"
    moved = write(tmp_path, "moved/Pulumi.aws-prod.yaml", data)

    diff = diff_workload_files([stack_file(tmp_path, "base"), moved])

    assert ("region", "us-east-1", "eu-west-1") in [(c.field, c.before, c.after) for c in diff.clouds[0].changes]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"inferstack:workload": {"placement": {"clouds": ["gcp"]}}}, "inferstack:cloud: is not among the workload's"),
        ({"inferstack:cloud": "azure"}, "inferstack:cloud: is not one of aws, gcp, alibaba, huawei"),
        ({"inferstack:stage": "staging"}, "inferstack:stage: is not one of validation, internal, production"),
        ({"aws:region": "us east 1"}, "aws:region: is not a region name"),
    ],
)
def test_a_stack_the_pulumi_program_refuses_is_refused_by_the_diff_with_the_same_key(tmp_path, edit, expected):
    # One function turns a stack's config into the workload it sizes (spec.for_stack): the diff never plans what
    # `pulumi up` would refuse (it used to overwrite the workload's allowed clouds with the stack's).
    data = yaml.safe_load(STACK.read_text())
    for key, value in edit.items():
        if key == "inferstack:workload":
            data["config"][key]["placement"] = {**data["config"][key].get("placement", {}), **value["placement"]}
        else:
            data["config"][key] = value
    stack = write(tmp_path, "edited/Pulumi.aws-prod.yaml", data)
    with pytest.raises(InputError, match=expected):
        diff_workload_files([stack_file(tmp_path, "base"), stack])


def test_a_stack_that_gives_a_plan_says_it_has_no_sizing_to_diff(tmp_path):
    stack = write(tmp_path, "Pulumi.dev.yaml", {"config": {"inferstack:cloud": "aws", "inferstack:planFile": "p.json"}})
    with pytest.raises(InputError, match="inferstack:workload: is not given in the stack file") as error:
        diff_workload_files([stack, stack])
    assert "pulumi preview" in str(error.value)


def _workload_file_stack(project: Path, name: str, **workload_changes: Any) -> Path:
    """A production stack that names its workload's file (the workload itself says `stage: internal`)."""
    write(project, "workloads/chat.yaml", edited(stage="internal", **workload_changes))
    (project / "Pulumi.yaml").write_text("name: p\nruntime: python\nstackConfigDir: stacks\n")
    return write(project, f"stacks/Pulumi.{name}.yaml", {"config": {
        "aws:region": "us-east-1", "inferstack:cloud": "aws", "inferstack:stage": "production",
        "inferstack:workloadFile": "workloads/chat.yaml"}})


def test_a_stack_that_names_a_workload_file_is_diffed_as_that_stack_deploys_it(tmp_path):
    # Issue 27's trap: the workload file says internal, the production stack deploys it at production.
    stack = _workload_file_stack(tmp_path / "p", "aws-prod")
    diff = diff_workload_files([stack, stack])
    (cloud,) = diff.clouds
    planned = plan_workload(load_workload(tmp_path / "p" / "workloads" / "chat.yaml"), clouds=["aws"])
    assert planned.outcome("aws").chosen.stage == "internal"  # the file alone plans another deployment
    report = plan_workload(diff_stack_spec(stack), clouds=["aws"])
    assert report.outcome("aws").chosen.stage == "production" and cloud.after == _summary(report)
    assert diff.pin_status == "not_pinned"


def diff_stack_spec(stack: Path) -> Any:
    from inferstack.stack_file import read_workload_file

    return read_workload_file(stack)


def _summary(report: PlanReport) -> str:
    chosen = report.outcome("aws").chosen
    gpus = f" ({chosen.accelerator.count}x {chosen.accelerator.name})" if chosen.accelerator else ""
    return f"{chosen.instance_count}x {chosen.instance_type}{gpus}, {chosen.region}"


# ---- --base-ref: the same path at another commit ------------------------------------------------------

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "workloads/chat.yaml", edited())
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    return root


@needs_git
def test_base_ref_reads_the_workload_at_that_commit(repo):
    head_file = write(repo, "workloads/chat.yaml", edited(traffic__concurrent_users=300))  # uncommitted edit

    diff = diff_workload_files([head_file], base_ref="main", clouds=["aws"])

    assert diff.base_source == "main:workloads/chat.yaml"
    assert [(c.field, c.before, c.after) for c in diff.workload_changes] == [("traffic.concurrent_users", 100, 300)]
    assert [c.cloud for c in diff.clouds] == ["aws"] and diff.clouds[0].status == "changed"
    assert "Base `main:workloads/chat.yaml` → head" in render_markdown(diff)


@needs_git
def test_base_ref_with_an_unchanged_file_reports_no_change(repo):
    diff = diff_workload_files([repo / "workloads" / "chat.yaml"], base_ref="main", clouds=["aws", "gcp"])

    assert diff.changed is False and diff.workload_changes == []


@needs_git
def test_a_workload_added_in_the_pull_request_is_a_new_workload(repo):
    new_file = write(repo, "workloads/new.yaml", edited(name="chat-new"))

    diff = diff_workload_files([new_file], base_ref="main", clouds=["aws"])
    markdown = render_markdown(diff)

    assert diff.base_currency is None and diff.clouds[0].status == "added"
    assert markdown.splitlines()[2].startswith("New workload (`main:workloads/new.yaml` does not exist)")
    assert "| aws | – | " in markdown


@needs_git
def test_base_ref_reads_a_model_config_file_at_that_commit_too(repo):
    config = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "torch_dtype": "bfloat16",
    }
    custom = edited(name="custom-llm", model={"name": "my-llama", "config": "config.json"})
    (repo / "workloads" / "config.json").write_text(json.dumps(config))
    write(repo, "workloads/custom.yaml", custom)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "custom model")
    (repo / "workloads" / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 48}))

    diff = diff_workload_files([repo / "workloads" / "custom.yaml"], base_ref="main", clouds=["aws"])

    assert diff.workload_changes == []  # the workload file itself did not change
    weights = next(c for c in diff.clouds[0].changes if c.field == "memory.weights_gib")
    assert weights.after / weights.before == pytest.approx(1.43, abs=0.03)  # 48/32 layers, embeddings unchanged


# ---- pinned stacks: what `pulumi up` deploys, and what the catalog alone changed ---------------------------


def _pinned_project(directory: Path) -> Path:
    """A Pulumi project with the aws-prod stack, pinned; returns the stack file."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Pulumi.yaml").write_text("name: p\nruntime: python\nstackConfigDir: stacks\n")
    stack = stack_file(directory, "stacks")
    main(["pin", str(stack)])
    return stack


def test_a_pinned_head_says_what_pulumi_up_deploys(tmp_path, capsys):
    stack = _pinned_project(tmp_path / "head")
    diff = diff_workload_files([stack_file(tmp_path, "base"), stack])
    pinned = PinnedPlan.model_validate_json(stack.with_name("Pulumi.aws-prod.plan.json").read_text())
    assert diff.pin.startswith("**Pinned** in Pulumi.aws-prod.plan.json")
    assert f"deploys {pinned.chosen().summary()}." in diff.pin
    assert diff.pin in render_markdown(diff) and diff.catalog_changes == []


def test_a_head_whose_workload_changed_after_its_pin_says_pulumi_up_refuses(tmp_path, capsys):
    stack = _pinned_project(tmp_path / "head")
    data = yaml.safe_load(stack.read_text())
    data["config"]["inferstack:workload"]["traffic"]["concurrent_users"] = 150
    stack.write_text(yaml.safe_dump(data))
    diff = diff_workload_files([stack_file(tmp_path, "base"), stack])
    assert diff.pin.startswith("**Pin out of date**: inferstack:workload changed")
    assert f"inferstack pin {stack}" in diff.pin
    assert diff.pin_status == "out_of_date"


def test_an_unpinned_stack_says_it_is_sized_at_deployment(tmp_path):
    diff = diff_workload_files([stack_file(tmp_path, "base"), stack_file(tmp_path, "head")])
    assert diff.pin.startswith("**Not pinned**")


def test_a_workload_file_has_no_pin_note(tmp_path):
    assert diff_pair(tmp_path, edited()).pin is None


def test_a_pinned_base_shows_what_the_catalog_alone_changed_apart_from_the_workload_change(tmp_path, capsys):
    base = _pinned_project(tmp_path / "base")
    pin = base.with_name("Pulumi.aws-prod.plan.json")
    pinned = json.loads(pin.read_text())
    chosen = pinned["report"]["clouds"][0]["chosen"]
    # The base was pinned when the price was lower: today's catalog alone makes it dearer.
    chosen["price"]["hourly_per_instance"]["amount"] *= 0.5
    for field in ("monthly", "monthly_ranking"):
        chosen["price"][field]["amount"] *= 0.5
    pin.write_text(json.dumps(pinned))
    head = stack_file(tmp_path, "head", traffic__concurrent_users=150)

    diff = diff_workload_files([base, head])

    (drift,) = diff.catalog_changes
    assert drift.cloud == "aws" and drift.status == "changed"
    assert drift.monthly_cost.after == pytest.approx(2 * drift.monthly_cost.before, rel=0.01)
    assert "instances" not in [c.label for c in drift.changes]  # the same servers, at today's price
    # The diff itself is the workload change alone: both sides planned today.
    assert [(c.field, c.before, c.after) for c in diff.workload_changes] == [("traffic.concurrent_users", 100, 150)]
    assert diff.catalog_pinned_on in render_markdown(diff) and "**Catalog and price changes**" in render_markdown(diff)


@needs_git
def test_base_ref_reads_the_stacks_pin_at_that_commit(tmp_path, capsys):
    repo = tmp_path / "repo"
    stack = _pinned_project(repo)
    pin = stack.with_name("Pulumi.aws-prod.plan.json")
    pinned = json.loads(pin.read_text())
    pinned["report"]["clouds"][0]["chosen"]["price"]["monthly_ranking"]["amount"] *= 0.5
    pin.write_text(json.dumps(pinned))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "pinned")
    pin.unlink()  # gone from the working tree: the base's pin is read from the commit

    diff = diff_workload_files([stack], base_ref="main")

    assert [c.cloud for c in diff.catalog_changes] == ["aws"] and diff.pin.startswith("**Not pinned**")


@needs_git
def test_a_pull_request_that_only_edits_the_pin_is_flagged_field_by_field_and_fails(tmp_path, capsys):
    # Issue 23's reproduction: only Pulumi.aws-prod.plan.json edited (workload hash kept), stage internal, no fleet.
    repo = tmp_path / "repo"
    stack = _pinned_project(repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "pinned")
    pin = stack.with_name("Pulumi.aws-prod.plan.json")
    pinned = json.loads(pin.read_text())
    chosen = pinned["report"]["clouds"][0]["chosen"]
    chosen["stage"], chosen["fleet"] = "internal", None
    pin.write_text(json.dumps(pinned, indent=2))

    diff = diff_workload_files([stack], base_ref="main")

    assert diff.pin_status == "refused" and diff.pin.startswith("**Pin refused**")
    assert 'stage: pinned "internal", planned "production"' in diff.pin and "fleet: pinned null" in diff.pin
    markdown = render_markdown(diff)
    assert "but `pulumi up` refuses this stack's pin" in markdown
    assert "every cloud plans the same instances" not in markdown  # not "No change" to what deploys
    capsys.readouterr()
    assert main(["diff", "--base-ref", "main", str(stack)]) == 2
    assert "**Pin refused**" in capsys.readouterr().out


def test_an_intact_pin_passes_the_diff_with_exit_0(tmp_path, capsys):
    stack = _pinned_project(tmp_path / "head")
    capsys.readouterr()
    assert main(["diff", str(stack_file(tmp_path, "base")), str(stack)]) == 0
    assert "**Pinned** in Pulumi.aws-prod.plan.json" in capsys.readouterr().out


@needs_git
def test_base_ref_reads_the_workload_file_a_stack_names_as_it_was_there(tmp_path):
    project = tmp_path / "p"
    stack = _workload_file_stack(project, "aws-prod")
    git(project, "init", "-q", "-b", "main")
    git(project, "add", ".")
    git(project, "commit", "-qm", "base")
    write(project, "workloads/chat.yaml", edited(stage="internal", traffic__concurrent_users=150))

    diff = diff_workload_files([stack], base_ref="main")

    assert [(c.field, c.before, c.after) for c in diff.workload_changes] == [("traffic.concurrent_users", 100, 150)]
    (cloud,) = diff.clouds
    assert cloud.status == "changed"


# ---- errors a user can fix ------------------------------------------------------------------------------


def test_a_missing_head_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        diff_workload_files([EXAMPLE, tmp_path / "missing.yaml"])


@needs_git
def test_an_unknown_base_ref_names_the_option_the_value_and_the_fix(repo):
    with pytest.raises(InputError) as error:
        diff_workload_files([repo / "workloads" / "chat.yaml"], base_ref="origin/no-such-branch")
    assert "--base-ref" in str(error.value) and "origin/no-such-branch" in str(error.value)
    assert "fetch-depth: 0" in str(error.value)


@needs_git
def test_an_option_like_base_ref_is_refused_before_git_sees_it(repo):
    with pytest.raises(InputError, match="is not a git revision"):
        diff_workload_files([repo / "workloads" / "chat.yaml"], base_ref="--output=/tmp/x")


@needs_git
def test_base_ref_outside_a_git_repository_is_an_input_error(tmp_path):
    outside = write(tmp_path / "not-a-repo", "chat.yaml", edited())
    with pytest.raises(InputError, match="needs the workload file to be in a git repository"):
        diff_workload_files([outside], base_ref="main")


@pytest.mark.parametrize(
    ("files", "base_ref", "expected"),
    [([EXAMPLE], None, "two files, BASE and HEAD"), ([EXAMPLE, EXAMPLE], "main", "one file with --base-ref")],
)
def test_the_wrong_number_of_files_says_how_to_call_it(files, base_ref, expected):
    with pytest.raises(InputError, match=expected) as error:
        diff_workload_files(files, base_ref=base_ref)
    assert "inferstack diff --base-ref origin/main HEAD.yaml" in str(error.value)


def test_spot_above_the_floor_shows_as_a_capacity_change_with_its_types(tmp_path):
    head = edited(placement__spot=True, placement__clouds=["aws", "gcp"])
    diff = diff_pair(tmp_path, head, edited(placement__clouds=["aws", "gcp"]))
    plan = chosen(plans(head, tmp_path), "aws")
    floor = plan.spot_above_floor
    assert floor is not None
    mix = f"{floor.on_demand_base} on-demand + up to {floor.spot_above} spot ({', '.join(floor.instance_types)})"
    assert [(c.field, c.before, c.after) for c in cloud(diff, "aws").changes if c.field == "spot"] == [
        ("spot", "all on-demand", mix)]
    assert "capacity (on-demand / spot)" in render_markdown(diff)
    assert not [c for c in cloud(diff, "gcp").changes if c.field == "spot"]  # Google Cloud keeps it on-demand


def test_a_change_of_the_spot_price_or_the_reports_currency_alone_is_no_rollout():
    from inferstack.diff import rollout_text
    from inferstack.plan import Money
    from inferstack.sizing.planner import plan_workload
    from inferstack.spec import load_workload

    plan = plan_workload(load_workload(EXAMPLE.parent / "chat-7b-spot.yaml"),
                         clouds=["aws"]).outcome("aws").chosen
    assert plan is not None and plan.spot_above_floor is not None
    repriced = plan.model_copy(update={"spot_above_floor": plan.spot_above_floor.model_copy(update={
        "spot_hourly_per_instance": Money(amount=9.99, currency="USD"), "monthly_at_ceiling": None,
        "spot_price_date": "2027-01-01"})})
    assert rollout_text(plan, repriced) is None
    regrouped = plan.model_copy(update={"spot_above_floor": plan.spot_above_floor.model_copy(update={
        "instance_types": plan.spot_above_floor.instance_types[:1]})})
    assert rollout_text(plan, regrouped) is not None and "spot above floor" in str(rollout_text(plan, regrouped))
