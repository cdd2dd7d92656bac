"""render_bootstrap: every variant (runtime × cloud × cpu/gpu × install mode) renders, passes Debian's
`cloud-init schema`, ships shell that passes shellcheck and units that pass `systemd-analyze verify`, fits EC2's
user-data limit once gzipped, and matches its golden file (UPDATE_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from sample_plans import sample_plan

from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.bootstrap.render import EC2_USER_DATA_LIMIT_BYTES, user_data_gzip
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan, Serving
from inferstack.spec import CLOUDS

GOLDEN_DIR = Path(__file__).parent / "golden"
SHIPPED_PROGRAMS = ("boot.sh", "cloud_access.py", "model_sync.py", "fetch_secret.py", "llamacpp_server.py")


def gpu_llamacpp_plan(cloud: str) -> DeploymentPlan:
    """The GPU LLM sample plan served by llama.cpp from a GGUF file (the planner's GGUF-on-GPU case)."""
    plan = sample_plan(cloud, "gpu-llm")  # type: ignore[arg-type]
    serving = Serving(runtime="llamacpp", engine="llamacpp", health_path="/health", max_model_len=4096,
                      max_num_seqs=8, dtype="q4_k_m", quantization="gguf")
    model = plan.model.model_copy(update={"artifact_format": "gguf", "bucket_prefix": "models/llama-3.1-8b/q4_k_m/"})
    return plan.model_copy(update={"serving": serving, "model": model})


# (name, plan factory, install mode): every runtime on every device and install mode it supports.
SHAPES = [
    ("vllm-gpu-container", lambda c: sample_plan(c, "gpu-llm"), "container"),
    ("vllm-gpu-native", lambda c: sample_plan(c, "gpu-llm"), "native"),
    ("llamacpp-cpu-native", lambda c: sample_plan(c, "cpu-llm"), "native"),
    ("llamacpp-cpu-container", lambda c: sample_plan(c, "cpu-llm"), "container"),
    ("llamacpp-gpu-container", gpu_llamacpp_plan, "container"),
    ("triton-cpu-container", lambda c: sample_plan(c, "cpu-encoder"), "container"),
    ("triton-gpu-container", lambda c: sample_plan(c, "gpu-encoder"), "container"),
]
VARIANTS = [pytest.param((cloud, factory, mode), id=f"{name}-{cloud}") for name, factory, mode in SHAPES
            for cloud in CLOUDS]


def options_for(plan: DeploymentPlan, mode: str = "auto", **extra: object) -> BootstrapOptions:
    return BootstrapOptions(model_bucket="acme-models", region=plan.region, api_key_secret="inferstack-api-key",
                            install_mode=mode, **extra)  # type: ignore[arg-type]


def written_files(user_data: str) -> dict[str, str]:
    return {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}


def golden_view(user_data: str) -> str:
    """The user data with the shipped programs (the same in every variant) reduced to their sha256."""
    lines = []
    for line in user_data.split("\n- path: "):
        path = line.split("\n", 1)[0]
        if path.rsplit("/", 1)[-1] in SHIPPED_PROGRAMS:
            body = written_files(user_data)[path]
            line = f"{path}\n  content: <shipped program, sha256 {hashlib.sha256(body.encode()).hexdigest()}>"
        lines.append(line)
    return "\n- path: ".join(lines)


@pytest.fixture(params=VARIANTS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, str]:
    cloud, factory, mode = request.param
    plan = factory(cloud)
    return request.node.callspec.id, render_bootstrap(plan, cloud, options_for(plan, mode))


def test_every_variant_passes_cloud_init_schema(rendered: tuple[str, str], tmp_path: Path) -> None:
    _, user_data = rendered
    config = tmp_path / "user-data"
    config.write_text(user_data)
    result = subprocess.run(["cloud-init", "schema", "--config-file", str(config)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Valid cloud-config" in result.stdout


def test_every_shell_script_it_writes_passes_shellcheck(rendered: tuple[str, str], tmp_path: Path) -> None:
    _, user_data = rendered
    scripts = {path: body for path, body in written_files(user_data).items()
               if body.startswith("#!/bin/bash") or path.endswith(".sh")}
    assert {"/usr/local/lib/inferstack/boot.sh", "/usr/local/lib/inferstack/run-server.sh"} <= set(scripts)
    for path, body in scripts.items():
        script = tmp_path / Path(path).name
        script.write_text(body)
        result = subprocess.run(["shellcheck", "--shell=bash", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, f"{path}:\n{result.stdout}"


def test_every_python_program_it_writes_parses_as_python_3_8(rendered: tuple[str, str]) -> None:
    _, user_data = rendered
    programs = {p: b for p, b in written_files(user_data).items() if p.endswith(".py")}
    assert "/usr/local/lib/inferstack/model_sync.py" in programs
    for path, body in programs.items():
        ast.parse(body, filename=path, feature_version=(3, 8))


def test_units_pass_systemd_analyze_verify(rendered: tuple[str, str], tmp_path: Path) -> None:
    _, user_data = rendered
    root = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    stubs = {"usr/lib/systemd/system/docker.service": "[Service]\nExecStart=/usr/bin/docker\n",
             "usr/lib/systemd/system/cloud-final.service": "[Service]\nExecStart=/usr/bin/python3\n",
             "usr/bin/docker": "#!/bin/sh\n", "usr/bin/python3": "#!/bin/sh\n"}
    for path, body in {**stubs, **{p.lstrip("/"): b for p, b in written_files(user_data).items()}}.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
        target.chmod(0o755)
    units = [str(root / "etc/systemd/system" / u) for u in ("inferstack-boot.service", "inferstack-server.service")]
    result = subprocess.run(["systemd-analyze", f"--root={root}", "verify", *units], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_variant_fits_the_ec2_user_data_limit_when_gzipped(rendered: tuple[str, str]) -> None:
    _, user_data = rendered
    assert len(user_data_gzip(user_data)) <= EC2_USER_DATA_LIMIT_BYTES


def test_every_variant_matches_its_golden_file(rendered: tuple[str, str]) -> None:
    variant, user_data = rendered
    golden = GOLDEN_DIR / f"{variant}.yaml"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(golden_view(user_data))
    assert golden.exists(), f"no golden file {golden.name}; run UPDATE_GOLDEN=1 pytest tests/bootstrap"
    assert golden_view(user_data) == golden.read_text(), f"{golden.name} drifted; review, then UPDATE_GOLDEN=1"


def test_every_golden_file_belongs_to_a_variant() -> None:
    expected = {f"{name}-{cloud}.yaml" for name, _, _ in SHAPES for cloud in CLOUDS}
    assert {p.name for p in GOLDEN_DIR.glob("*.yaml")} == expected


def test_rendering_is_deterministic() -> None:
    plan = sample_plan("gcp", "gpu-llm")
    assert render_bootstrap(plan, "gcp", options_for(plan)) == render_bootstrap(plan, "gcp", options_for(plan))


#### What the user data says ####


def test_auto_mode_runs_gpu_runtimes_in_containers_and_llamacpp_natively_on_cpu() -> None:
    modes = {}
    for variant in ("gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"):
        plan = sample_plan("aws", variant)
        modes[variant] = written_files(render_bootstrap(plan, "aws", options_for(plan)))[
            "/etc/inferstack/bootstrap.env"].split("INSTALL_MODE=")[1].split("\n")[0]
    assert modes == {"gpu-llm": "container", "cpu-llm": "native", "cpu-encoder": "container",
                     "gpu-encoder": "container"}


def test_the_api_key_is_fetched_at_service_start_by_name_and_never_written_into_user_data() -> None:
    plan = sample_plan("huawei", "gpu-llm")
    files = written_files(render_bootstrap(plan, "huawei", options_for(plan)))
    unit = files["/etc/systemd/system/inferstack-server.service"]
    assert ("ExecStartPre=/usr/bin/python3 /usr/local/lib/inferstack/fetch_secret.py --cloud huawei "
            "--region ap-southeast-3 --secret VLLM_API_KEY=inferstack-api-key "
            "--out /run/inferstack/secrets.env") in unit
    assert "--env-file /run/inferstack/secrets.env" in files["/usr/local/lib/inferstack/run-server.sh"]


def test_a_hub_token_is_fetched_with_the_api_key_and_given_to_the_runtime_as_hf_token() -> None:
    plan = sample_plan("aws", "cpu-llm")
    options = BootstrapOptions(model_bucket="b", region="us-east-1", api_key_secret="/app/api-key",
                               hub_token_secret="/app/hub-token", install_mode="native")
    user_data = render_bootstrap(plan, "aws", options)
    files = written_files(user_data)
    assert ("fetch_secret.py --cloud aws --region us-east-1 --secret API_KEY=/app/api-key "
            "--secret HF_TOKEN=/app/hub-token --out /run/inferstack/secrets.env") in (
        files["/etc/systemd/system/inferstack-server.service"])
    # The native server script exports everything in the secrets file, so the runtime sees HF_TOKEN.
    assert "set -a; . /run/inferstack/secrets.env; set +a" in files["/usr/local/lib/inferstack/run-server.sh"]


def test_a_hub_token_alone_still_installs_the_fetcher() -> None:
    plan = sample_plan("gcp", "gpu-llm")
    files = written_files(render_bootstrap(plan, "gcp", BootstrapOptions(model_bucket="b", region="us-central1",
                                                                         hub_token_secret="hub-token")))
    assert "/usr/local/lib/inferstack/fetch_secret.py" in files
    assert "--secret HF_TOKEN=hub-token --out" in files["/etc/systemd/system/inferstack-server.service"]


def test_without_an_api_key_secret_nothing_fetches_one() -> None:
    plan = sample_plan("aws", "cpu-llm")
    files = written_files(render_bootstrap(plan, "aws", BootstrapOptions(model_bucket="b", region="us-east-1")))
    assert "ExecStartPre" not in files["/etc/systemd/system/inferstack-server.service"]
    assert "/usr/local/lib/inferstack/fetch_secret.py" not in files


def test_the_server_command_line_carries_the_plans_serving_settings() -> None:
    plan = sample_plan("aws", "gpu-llm")
    script = written_files(render_bootstrap(plan, "aws", options_for(plan)))["/usr/local/lib/inferstack/run-server.sh"]
    assert ('vllm/vllm-openai:v0.12.0 --model "${MODEL_DIR}" --served-model-name llama-3.1-8b --host 0.0.0.0 '
            "--port 8000 --tensor-parallel-size 1 --dtype bfloat16 --max-model-len 4096 --max-num-seqs 32 "
            "--gpu-memory-utilization 0.9") in script
    assert "--gpus all --ipc=host" in script


def test_local_nvme_is_used_when_the_plan_has_it() -> None:
    with_nvme, without = sample_plan("aws", "gpu-llm"), sample_plan("gcp", "gpu-llm")
    env = {p.cloud: written_files(render_bootstrap(p, p.cloud, options_for(p)))["/etc/inferstack/bootstrap.env"]
           for p in (with_nvme, without)}
    assert "NVME_EXPECTED=1" in env["aws"] and "NVME_EXPECTED=0" in env["gcp"]


#### Bad input ####


def test_triton_native_is_refused_naming_the_field_and_the_fix() -> None:
    plan = sample_plan("aws", "cpu-encoder")
    with pytest.raises(InputError, match=r"options.install_mode: triton has no native install .*Fix: use "
                                         r"install_mode='container'"):
        render_bootstrap(plan, "aws", options_for(plan, "native"))


def test_a_cloud_other_than_the_plans_is_refused() -> None:
    plan = sample_plan("aws", "gpu-llm")
    with pytest.raises(InputError, match=r"cloud: does not match the plan's cloud 'aws' \(got 'gcp'\)"):
        render_bootstrap(plan, "gcp", options_for(plan))


@pytest.mark.parametrize("bucket", ["models; rm -rf /", "models$(id)", "a b", "x\ny"])
def test_names_that_could_inject_shell_are_refused(bucket: str) -> None:
    plan = sample_plan("alibaba", "cpu-llm")
    with pytest.raises(InputError, match=r"options\.model_bucket: contains characters that are unsafe"):
        render_bootstrap(plan, "alibaba", BootstrapOptions(model_bucket=bucket, region="ap-southeast-1"))


def test_vllm_on_a_cpu_server_is_refused() -> None:
    plan = sample_plan("aws", "cpu-llm")
    plan = plan.model_copy(update={"serving": plan.serving.model_copy(update={"runtime": "vllm"}),
                                   "model": plan.model.model_copy(update={"artifact_format": "safetensors"})})
    with pytest.raises(InputError, match=r"plan\.serving\.runtime: vllm does not run on cpu servers"):
        render_bootstrap(plan, "aws", options_for(plan))


def test_the_shipped_programs_run_without_their_docstrings(tmp_path: Path) -> None:
    from inferstack.bootstrap.render import shipped_copy

    for name in ("cloud_access.py", "model_sync.py", "fetch_secret.py"):
        (tmp_path / name).write_text(shipped_copy(name))
    for program in ("model_sync.py", "fetch_secret.py"):
        result = subprocess.run(["python3", str(tmp_path / program), "--help"], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert "--cloud" in result.stdout
