"""A runtime that streams the weights from the bucket (`plan.startup.model_loading: stream`, AWS + vLLM on GPUs): the
settings boot.sh reads, vLLM's command line, the credentials of its own that the runtime's unit fetches at each start
and hands to the container in a root-only file, what is refused, and the model path boot.sh writes for it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError
from sample_plans import sample_plan
from test_bootstrap_render import (
    assert_units_pass_systemd_analyze_verify,
    boot_sh_under,
    settings_of,
    unit_settings,
    written_files,
)

from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.bootstrap.render import LIB_DIR, RUNTIME_CREDENTIALS, RenderedBootstrap
from inferstack.bootstrap.runtimes import Env, vllm_args
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan
from inferstack.sizing.coldstart import STREAM_CONCURRENCY

ROLE = "arn:aws:iam::123456789012:role/chat-identity-model-reader-1a2b3c4"
SERVER_UNIT = "inferstack-server.service"


def streaming(plan: DeploymentPlan) -> DeploymentPlan:
    return plan.model_copy(update={"startup": plan.startup.model_copy(update={"model_loading": "stream"})})


def options(plan: DeploymentPlan, mode: str = "auto", **extra: object) -> BootstrapOptions:
    return BootstrapOptions(model_bucket="acme-models", region=plan.region, install_mode=mode,  # type: ignore[arg-type]
                            **extra)  # type: ignore[arg-type]


def render_streaming(mode: str = "auto") -> tuple[DeploymentPlan, RenderedBootstrap]:
    plan = streaming(sample_plan("aws", "gpu-llm"))
    return plan, render_bootstrap(plan, "aws", options(plan, mode, model_reader_role=ROLE))


def exec_lines(result: RenderedBootstrap, key: str) -> list[str]:
    return [value for name, value in unit_settings(result, SERVER_UNIT) if name == key]


#### Settings and command line ####


def test_a_streaming_plan_tells_boot_sh_to_stream_and_names_the_reader_role() -> None:
    _, result = render_streaming()
    settings = settings_of(result)
    assert settings["MODEL_LOADING"] == "stream" and settings["MODEL_READER_ROLE"] == ROLE


def test_a_downloading_plan_has_neither_setting() -> None:
    plan = sample_plan("aws", "gpu-llm")
    settings = settings_of(render_bootstrap(plan, "aws", options(plan)))
    assert "MODEL_LOADING" not in settings and "MODEL_READER_ROLE" not in settings


def test_vllm_streams_with_the_run_ai_streamer_from_the_model_path_boot_sh_writes() -> None:
    plan = streaming(sample_plan("aws", "gpu-llm"))
    args = vllm_args(plan, "container")
    assert args[:2] == ["--model", Env("MODEL_DIR")]
    assert args[args.index("--load-format") + 1] == "runai_streamer"
    assert "--load-format" not in vllm_args(sample_plan("aws", "gpu-llm"), "container")


def test_the_container_gets_the_reader_roles_credentials_from_a_root_only_file_and_no_metadata_lookup() -> None:
    _, result = render_streaming()
    (start,) = exec_lines(result, "ExecStart")
    words = start.split()
    image = next(w for w in words if w.startswith("vllm/"))
    before_image = words[:words.index(image)]  # docker's own options, not the runtime's
    assert before_image[before_image.index("--env-file") + 1] == RUNTIME_CREDENTIALS
    assert RUNTIME_CREDENTIALS.startswith("/run/inferstack-secrets/")  # root-only (0700), on a tmpfs
    pairs = {before_image[i + 1] for i, w in enumerate(before_image) if w == "-e"}
    assert {f"RUNAI_STREAMER_CONCURRENCY={STREAM_CONCURRENCY}", "AWS_EC2_METADATA_DISABLED=true"} <= pairs
    assert not any(w.startswith(("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")) for w in words)


def test_the_runtimes_unit_fetches_its_credentials_as_root_at_each_start_before_the_container_runs() -> None:
    plan, result = render_streaming()
    pre = exec_lines(result, "ExecStartPre")
    fetch = [line for line in pre if "runtime-credentials" in line]
    assert fetch == [f"+/usr/bin/python3 {LIB_DIR}/cloud_access.py runtime-credentials --region {plan.region} "
                     f"--role-arn {ROLE} --out {RUNTIME_CREDENTIALS}"]
    assert pre.index(fetch[0]) > next(i for i, line in enumerate(pre) if "metadata_firewall" in line)
    assert pre.index(fetch[0]) < next(i for i, line in enumerate(pre) if "docker rm" in line)
    assert ROLE not in result.user_data.replace(f"MODEL_READER_ROLE={ROLE}", "")  # only the setting names it


def test_a_downloading_runtime_gets_no_credentials_of_its_own() -> None:
    plan = sample_plan("aws", "gpu-llm")
    unit = written_files(render_bootstrap(plan, "aws", options(plan)))[f"/etc/systemd/system/{SERVER_UNIT}"]
    assert "runtime-credentials" not in unit and "--env-file" not in unit and "RUNAI_STREAMER" not in unit


def test_the_streaming_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    assert_units_pass_systemd_analyze_verify(render_streaming()[1], tmp_path)


#### Refused ####


def test_streaming_without_the_reader_role_is_refused_naming_the_option() -> None:
    plan = streaming(sample_plan("aws", "gpu-llm"))
    with pytest.raises(InputError, match=r"options\.model_reader_role.*never the instance's"):
        render_bootstrap(plan, "aws", options(plan))


def test_a_reader_role_for_a_plan_that_downloads_is_refused() -> None:
    plan = sample_plan("aws", "gpu-llm")
    with pytest.raises(InputError, match=r"options\.model_reader_role.*does not stream"):
        render_bootstrap(plan, "aws", options(plan, model_reader_role=ROLE))


def test_streaming_natively_is_refused_with_the_fix() -> None:
    with pytest.raises(InputError, match=r"cannot stream the weights natively.*install_mode='container'"):
        render_streaming("native")


@pytest.mark.parametrize("cloud", ["gcp", "alibaba", "huawei"])
def test_streaming_elsewhere_than_aws_is_refused(cloud: str) -> None:
    plan = streaming(sample_plan(cloud, "gpu-llm"))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="built on AWS only"):
        render_bootstrap(plan, cloud, options(plan, model_reader_role=ROLE))  # type: ignore[arg-type]


def test_streaming_with_a_runtime_that_does_not_stream_is_refused() -> None:
    plan = streaming(sample_plan("aws", "cpu-llm"))
    with pytest.raises(InputError, match="does not do"):
        render_bootstrap(plan, "aws", options(plan, model_reader_role=ROLE))


@pytest.mark.parametrize("role", ["arn:aws:iam::123456789012:user/someone", "arn:aws:iam::*:role/reader",
                                  "arn:aws:iam::123456789012:role/reader --out /etc/passwd", ""])
def test_a_reader_role_that_is_not_a_roles_arn_is_refused(role: str) -> None:
    with pytest.raises(ValidationError, match="model_reader_role"):
        BootstrapOptions(model_bucket="acme-models", region="eu-west-1", model_reader_role=role)


#### boot.sh: the model path the runtime reads ####


def _run_phase(tmp_path: Path, result: RenderedBootstrap, phase: str) -> str:
    """boot.sh --phase `phase`, as shipped, its fixed paths under tmp_path: systemctl, id and the sync program stand
    in (the sync says it verified the files). Returns the model.env it wrote."""
    lib = tmp_path / "lib"
    lib.mkdir(exist_ok=True)
    (lib / "model_sync.py").write_text("print('synced and verified')\n")
    moved = {LIB_DIR: str(lib), **dict.fromkeys(("/etc/inferstack/model.env", "/var/lib/inferstack",
                                                 "/run/inferstack-boot", "/var/log/inferstack"), "")}
    stubs = "systemctl() { return 0; }\nid() { echo 1000; }\n"
    script, env = boot_sh_under(tmp_path, written_files(result), moved, stubs)
    run = subprocess.run(["bash", str(script), "--phase", phase], env=env, capture_output=True, text=True)
    rc = (tmp_path / "run-inferstack-boot" / f"{phase}.rc").read_text().strip()
    assert rc == "0", run.stdout + run.stderr
    return (tmp_path / "etc-inferstack-model.env").read_text()


@pytest.mark.parametrize("phase", ["service", "model_sync"])
def test_a_streaming_runtime_reads_the_models_prefix_in_the_bucket_whichever_phase_writes_its_path(
        tmp_path: Path, phase: str) -> None:
    plan, result = render_streaming()
    model_env = _run_phase(tmp_path, result, phase)
    assert f"MODEL_DIR=s3://acme-models/{plan.model.bucket_prefix}\n" in model_env
    assert plan.model.bucket_prefix.endswith("/")


def test_a_downloading_runtime_reads_the_synced_copy(tmp_path: Path) -> None:
    plan = sample_plan("aws", "gpu-llm")
    model_env = _run_phase(tmp_path, render_bootstrap(plan, "aws", options(plan)), "model_sync")
    assert f"MODEL_DIR={tmp_path}/var-lib-inferstack/models/{plan.model.name}/current\n" in model_env
