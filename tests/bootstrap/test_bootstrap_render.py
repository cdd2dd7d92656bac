"""render_bootstrap: every variant (runtime × cloud × cpu/gpu × install mode) renders user data that passes
Debian's `cloud-init schema` and a bundle whose shell passes shellcheck and whose units pass `systemd-analyze
verify`; both match their golden file (UPDATE_GOLDEN=1 rewrites them). The runtime runs unprivileged behind the
gateway, and no secret is ever on a command line."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from sample_plans import one_at_a_time, sample_plan

from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.bootstrap.render import RenderedBootstrap
from inferstack.bootstrap.telemetry import AGENT_SCRIPT, TelemetryTarget
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan, Serving
from inferstack.spec import CLOUDS

GOLDEN_DIR = Path(__file__).parent / "golden"
SHIPPED_PROGRAMS = ("boot.sh", "cloud_access.py", "model_sync.py", "fetch_secret.py", "llamacpp_server.py",
                    "fetch_bundle.py", "interruption_watch.py")
UNITS = ("inferstack-boot.service", "inferstack-server.service", "inferstack-gateway.service")


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
    ("llamacpp-cpu-native", lambda c: one_at_a_time(sample_plan(c, "cpu-llm")), "native"),
    ("llamacpp-cpu-container", lambda c: sample_plan(c, "cpu-llm"), "container"),
    ("llamacpp-gpu-container", gpu_llamacpp_plan, "container"),
    ("triton-cpu-container", lambda c: sample_plan(c, "cpu-encoder"), "container"),
    ("triton-gpu-container", lambda c: sample_plan(c, "gpu-encoder"), "container"),
]


def two_process_plan(plan: DeploymentPlan) -> DeploymentPlan:
    """`plan` with two model processes per server: on CPU one per NUMA node, each serving one request at a time (as
    the planner sizes them), on GPU one per pair of four GPUs."""
    serving = plan.serving.model_copy(update={"processes": 2})
    if not plan.accelerator:
        return one_at_a_time(plan.model_copy(update={"serving": serving}))
    serving = serving.model_copy(update={"tensor_parallel": 2})
    return plan.model_copy(update={"serving": serving, "tensor_parallel": 2,
                                   "accelerator": plan.accelerator.model_copy(update={"count": 4})})


VARIANTS = [pytest.param((cloud, factory, mode), id=f"{name}-{cloud}") for name, factory, mode in SHAPES
            for cloud in CLOUDS] + [
    # Several model processes per server (one cloud: the units and the gateway do not differ by cloud).
    pytest.param(("aws", lambda c: two_process_plan(sample_plan(c, "cpu-llm")), "native"),
                 id="llamacpp-cpu-native-2-processes-aws"),
    pytest.param(("aws", lambda c: two_process_plan(sample_plan(c, "gpu-llm")), "container"),
                 id="vllm-gpu-container-2-processes-aws"),
    # A plan whose servers may be interrupted (spot): the interruption watcher and the gateway's drain check.
    pytest.param(("aws", lambda c: one_at_a_time(sample_plan(c, "cpu-llm")).model_copy(update={"spot": True}),
                  "native"), id="llamacpp-cpu-native-spot-aws"),
]


def options_for(plan: DeploymentPlan, mode: str = "auto", **extra: object) -> BootstrapOptions:
    return BootstrapOptions(model_bucket="acme-models", region=plan.region, api_key_secret="inferstack-api-key",
                            install_mode=mode, **extra)  # type: ignore[arg-type]


def written_files(result: RenderedBootstrap) -> dict[str, str]:
    """Every file the server ends up with: the user data's, then the bundle's."""
    files = {f["path"]: f["content"] for f in yaml.safe_load(result.user_data)["write_files"]}
    files.update({f["path"]: f["content"] for f in json.loads(result.bundle)["files"]})
    return files


def boot_sh_under(tmp_path: Path, files: dict[str, str], moved: dict[str, str],
                  stubs: str) -> tuple[Path, dict[str, str]]:
    """boot.sh as shipped, each of its `moved` fixed paths replaced (a path to its stand-in; "" puts it under tmp_path,
    /a/b becoming tmp_path/a-b) and `stubs` (shell functions standing in for commands) sourced before its phase
    dispatch, with its bootstrap.env beside it. Returns the script and the environment that points it there."""
    script = files["/usr/local/lib/inferstack/boot.sh"]
    for fixed, stand_in in moved.items():
        assert fixed in script, fixed
        script = script.replace(fixed, stand_in or str(tmp_path / fixed.strip("/").replace("/", "-")))
    (tmp_path / "stubs.sh").write_text(stubs)
    dispatch = 'if [ "${1:-}" = --phase ]; then'
    script = script.replace(dispatch, f". {tmp_path / 'stubs.sh'}\n{dispatch}", 1)
    (tmp_path / "boot.sh").write_text(script)
    (tmp_path / "bootstrap.env").write_text(files["/etc/inferstack/bootstrap.env"])
    return tmp_path / "boot.sh", {**os.environ, "INFERSTACK_CONFIG": str(tmp_path / "bootstrap.env")}


def golden_view(result: RenderedBootstrap) -> str:
    """Each file with its path, the shipped programs (the same in every variant) reduced to their sha256."""
    sections = [f"# user data: {result.user_data.splitlines()[1]}"]
    for path, body in written_files(result).items():
        if path.rsplit("/", 1)[-1] in SHIPPED_PROGRAMS:
            body = f"<shipped program, sha256 {hashlib.sha256(body.encode()).hexdigest()}>\n"
        sections.append(f"==> {path}\n{body}")
    return "\n".join(sections)


@pytest.fixture(params=VARIANTS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, RenderedBootstrap]:
    cloud, factory, mode = request.param
    plan = factory(cloud)
    return request.node.callspec.id, render_bootstrap(plan, cloud, options_for(plan, mode))


def test_every_variants_user_data_passes_cloud_init_schema(rendered: tuple[str, RenderedBootstrap],
                                                            tmp_path: Path) -> None:
    config = tmp_path / "user-data"
    config.write_text(rendered[1].user_data)
    result = subprocess.run(["cloud-init", "schema", "--config-file", str(config)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Valid cloud-config" in result.stdout


def shellchecked(result: RenderedBootstrap, tmp_path: Path) -> set[str]:
    """The paths of the shell scripts `result` writes, each checked to pass shellcheck."""
    scripts = {path: body for path, body in written_files(result).items()
               if body.startswith("#!/bin/bash") or path.endswith(".sh")}
    for path, body in scripts.items():
        script = tmp_path / Path(path).name
        script.write_text(body)
        checked = subprocess.run(["shellcheck", "--shell=bash", str(script)], capture_output=True, text=True)
        assert checked.returncode == 0, f"{path}:\n{checked.stdout}"
    return set(scripts)


def test_every_shell_script_it_writes_passes_shellcheck(rendered: tuple[str, RenderedBootstrap],
                                                        tmp_path: Path) -> None:
    assert shellchecked(rendered[1], tmp_path) == {"/usr/local/lib/inferstack/boot.sh"}


# Where each cloud's agent sends (in its own terms, bootstrap/telemetry.TelemetryTarget); Huawei installs none.
AGENT_TARGETS = {
    "aws": TelemetryTarget(logs="inferstack/demo/prod/server", metrics="inferstack/demo/prod/server"),
    "gcp": TelemetryTarget(logs="inferstack-prod-server-logs-1a2b3c4d", metrics="inferstack-prod-server-logs-1a2b3c4d"),
    "alibaba": TelemetryTarget(logs="inferstack-prod-server-logs-1a2b3c/server-logs", metrics="acs_ecs_dashboard")}


@pytest.mark.parametrize("cloud", sorted(AGENT_TARGETS))
def test_the_monitoring_agents_install_script_passes_shellcheck_too(cloud: str, tmp_path: Path) -> None:
    plan = sample_plan(cloud, "gpu-llm")  # type: ignore[arg-type]
    result = render_bootstrap(plan, cloud, options_for(plan, telemetry=AGENT_TARGETS[cloud]))
    assert shellchecked(result, tmp_path) == {"/usr/local/lib/inferstack/boot.sh", AGENT_SCRIPT}


def test_every_python_program_it_writes_parses_as_python_3_8(rendered: tuple[str, RenderedBootstrap]) -> None:
    programs = {p: b for p, b in written_files(rendered[1]).items() if p.endswith(".py")}
    assert {"/usr/local/lib/inferstack/model_sync.py", "/usr/local/lib/inferstack/fetch_bundle.py"} <= set(programs)
    for path, body in programs.items():
        ast.parse(body, filename=path, feature_version=(3, 8))


def test_units_pass_systemd_analyze_verify(rendered: tuple[str, RenderedBootstrap], tmp_path: Path) -> None:
    assert_units_pass_systemd_analyze_verify(rendered[1], tmp_path)


@pytest.mark.parametrize(("variant", "mode"), [("cpu-llm", "native"), ("gpu-llm", "container")])
def test_units_that_fetch_every_secret_pass_systemd_analyze_verify(variant: str, mode: str, tmp_path: Path) -> None:
    """The runtime's unit with its hub token fetch (natively through systemd-run, outside its IP filter)."""
    plan = sample_plan("aws", variant)  # type: ignore[arg-type]
    plan = one_at_a_time(plan) if mode == "native" else plan
    result = render_bootstrap(plan, "aws", options_for(plan, mode, hub_token_secret="/inferstack/hub-token"))
    assert "fetch_secret.py" in written_files(result)["/etc/systemd/system/inferstack-server.service"]
    assert_units_pass_systemd_analyze_verify(result, tmp_path)


def assert_units_pass_systemd_analyze_verify(rendered: RenderedBootstrap, tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    stubs = {"usr/lib/systemd/system/docker.service": "[Service]\nExecStart=/usr/bin/docker\n",
             "usr/lib/systemd/system/cloud-final.service": "[Service]\nExecStart=/usr/bin/python3\n",
             "usr/bin/docker": "#!/bin/sh\n", "usr/bin/python3": "#!/bin/sh\n", "usr/sbin/nginx": "#!/bin/sh\n",
             "usr/bin/systemd-run": "#!/bin/sh\n"}
    for path, body in {**stubs, **{p.lstrip("/"): b for p, b in written_files(rendered).items()}}.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
        target.chmod(0o755)
    (root / "opt/inferstack/venv/bin").mkdir(parents=True)
    (root / "opt/inferstack/venv/bin/python3").symlink_to("/usr/bin/python3")
    units = [str(root / path.lstrip("/")) for path in written_files(rendered) if path.endswith(".service")]
    assert len(units) >= len(UNITS)
    result = subprocess.run(["systemd-analyze", f"--root={root}", "verify", *units], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # A setting systemd cannot parse is only a warning ("... is invalid, ignoring assignment"), yet it is lost. (Of
    # each Exec*= list, verify checks the first command only: systemd 252.)
    assert "ignoring" not in result.stdout + result.stderr, result.stdout + result.stderr


def test_every_variant_matches_its_golden_file(rendered: tuple[str, RenderedBootstrap]) -> None:
    variant, result = rendered
    golden = GOLDEN_DIR / f"{variant}.txt"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(golden_view(result))
    assert golden.exists(), f"no golden file {golden.name}; run UPDATE_GOLDEN=1 pytest tests/bootstrap"
    assert golden_view(result) == golden.read_text(), f"{golden.name} drifted; review, then UPDATE_GOLDEN=1"


def test_every_golden_file_belongs_to_a_variant() -> None:
    expected = {f"{variant.id}.txt" for variant in VARIANTS}
    assert {p.name for p in GOLDEN_DIR.iterdir()} == expected


def test_rendering_is_deterministic() -> None:
    plan = sample_plan("gcp", "gpu-llm")
    assert render_bootstrap(plan, "gcp", options_for(plan)) == render_bootstrap(plan, "gcp", options_for(plan))


#### What the server gets ####


def settings_of(result: RenderedBootstrap) -> dict[str, str]:
    lines = written_files(result)["/etc/inferstack/bootstrap.env"].splitlines()
    return dict(line.split("=", 1) for line in lines if not line.startswith("#"))


def unit_settings(result: RenderedBootstrap, unit: str) -> list[tuple[str, str]]:
    text = written_files(result)[f"/etc/systemd/system/{unit}"]
    return [tuple(line.split("=", 1)) for line in text.splitlines() if "=" in line]  # type: ignore[misc]


def test_auto_mode_runs_containers_but_several_cpu_processes_natively() -> None:
    """llama.cpp on CPU in a container too: llama-server serves the plan's slots at once, llama-cpp-python one request
    at a time; several CPU processes natively, where systemd binds each to its NUMA node."""
    modes = {}
    for variant in ("gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"):
        plan = sample_plan("aws", variant)
        modes[variant] = settings_of(render_bootstrap(plan, "aws", options_for(plan)))["INSTALL_MODE"]
    plan = two_process_plan(sample_plan("aws", "cpu-llm"))
    modes["cpu-llm-2-processes"] = settings_of(render_bootstrap(plan, "aws", options_for(plan)))["INSTALL_MODE"]
    assert modes == {"gpu-llm": "container", "cpu-llm": "container", "cpu-encoder": "container",
                     "gpu-encoder": "container", "cpu-llm-2-processes": "native"}
    plan = sample_plan("aws", "cpu-llm")
    start = dict(unit_settings(render_bootstrap(plan, "aws", options_for(plan)), "inferstack-server.service"))[
        "ExecStart"]
    assert plan.serving.max_num_seqs and f" -np {plan.serving.max_num_seqs} " in start, start


def test_the_api_key_is_fetched_by_the_gateway_at_each_start_as_root_into_its_map_file() -> None:
    plan = sample_plan("huawei", "gpu-llm")
    result = render_bootstrap(plan, "huawei", options_for(plan))
    assert ("ExecStartPre", "+/usr/bin/python3 /usr/local/lib/inferstack/fetch_secret.py --cloud huawei "
            "--region ap-southeast-3 --secret API_KEY=inferstack-api-key "
            "--out /run/inferstack-secrets/gateway-key.map --format nginx-bearer-map") in unit_settings(
        result, "inferstack-gateway.service")
    assert "include /run/inferstack-secrets/gateway-key.map;" in written_files(result)["/etc/inferstack/gateway.conf"]
    assert "API_KEY" not in written_files(result)["/etc/systemd/system/inferstack-server.service"]


def test_a_hub_token_is_fetched_for_the_runtime_and_given_to_it_as_hf_token() -> None:
    plan = one_at_a_time(sample_plan("aws", "cpu-llm"))
    options = BootstrapOptions(model_bucket="bucket", region="us-east-1", api_key_secret="/app/api-key",
                               hub_token_secret="/app/hub-token", install_mode="native")
    server = unit_settings(render_bootstrap(plan, "aws", options), "inferstack-server.service")
    # As root, in a unit of its own: the runtime's unit may not reach the metadata server, where the fetch reads the
    # instance's credentials (test_bootstrap_metadata_firewall.py).
    assert ("ExecStartPre", "+/usr/bin/systemd-run --quiet --wait --pipe --collect /usr/bin/python3 "
            "/usr/local/lib/inferstack/fetch_secret.py --cloud aws --region us-east-1 --secret HF_TOKEN=/app/hub-token "
            "--out /run/inferstack-secrets/server.env --format env") in server
    assert ("EnvironmentFile", "-/run/inferstack-secrets/server.env") in server  # read by systemd (root) at start


def test_a_container_runtime_gets_the_hub_token_by_name_from_its_environment() -> None:
    plan = sample_plan("gcp", "gpu-llm")
    result = render_bootstrap(plan, "gcp", BootstrapOptions(model_bucket="bucket", region="us-central1",
                                                            hub_token_secret="hub-token"))
    start = dict(unit_settings(result, "inferstack-server.service"))["ExecStart"]
    assert " -e HF_TOKEN " in start
    assert "ExecStartPre" not in written_files(result)["/etc/systemd/system/inferstack-gateway.service"].replace(
        "ExecStartPre=/usr/sbin/nginx", "")


def test_without_secrets_nothing_fetches_one() -> None:
    plan = sample_plan("aws", "cpu-llm")
    result = render_bootstrap(plan, "aws", BootstrapOptions(model_bucket="bucket", region="us-east-1"))
    units = "".join(written_files(result)[f"/etc/systemd/system/{unit}"] for unit in UNITS)
    assert "fetch_secret.py" not in units and "secrets" not in units
    assert "$inferstack_authorized" not in written_files(result)["/etc/inferstack/gateway.conf"]


def test_a_native_runtime_runs_unprivileged_and_sandboxed_on_loopback() -> None:
    plan = one_at_a_time(sample_plan("aws", "cpu-llm"))
    server = unit_settings(render_bootstrap(plan, "aws", options_for(plan, "native")), "inferstack-server.service")
    for setting in [("User", "inferstack"), ("Group", "inferstack"), ("NoNewPrivileges", "yes"),
                    ("ProtectSystem", "full"), ("ProtectHome", "yes"), ("CapabilityBoundingSet", "")]:
        assert setting in server
    start = dict(server)["ExecStart"]
    assert start.startswith("/opt/inferstack/venv/bin/python3 /usr/local/lib/inferstack/llamacpp_server.py "
                            "--model ${MODEL_FILE} --model_alias llama-3.1-8b --host 127.0.0.1 --port 18000")


def test_a_container_runtime_runs_as_the_runtime_user_without_capabilities_on_loopback() -> None:
    plan = sample_plan("aws", "gpu-llm")
    start = dict(unit_settings(render_bootstrap(plan, "aws", options_for(plan)), "inferstack-server.service"))[
        "ExecStart"]
    assert start.startswith("/usr/bin/docker run --rm --name inferstack-server --init "
                            "--user=${RUNTIME_UID}:${RUNTIME_GID} --cap-drop=ALL --security-opt=no-new-privileges "
                            "--ulimit memlock=-1 -p 127.0.0.1:18000:18000 --gpus all --ipc=host ")
    assert start.endswith("vllm/vllm-openai:v0.12.0 --model ${MODEL_DIR} --served-model-name llama-3.1-8b --host "
                          "0.0.0.0 --port 18000 --tensor-parallel-size 1 --dtype bfloat16 --max-model-len 4096 "
                          "--max-num-seqs 32 --gpu-memory-utilization 0.9")


def test_every_port_a_container_publishes_is_on_the_hosts_loopback(rendered: tuple[str, RenderedBootstrap]) -> None:
    """The API and the metrics ports alike (Triton's 8002): only the gateway and the monitoring agent reach them."""
    for path, content in written_files(rendered[1]).items():
        words = " ".join(line for line in content.splitlines() if line.startswith("ExecStart")).split()
        published = [words[i + 1] for i, word in enumerate(words) if word in ("-p", "--publish")]
        assert all(p.startswith("127.0.0.1:") for p in published), (path, published)


def test_no_runtime_gets_an_api_key_on_its_command_line_or_in_its_environment() -> None:
    for variant in ("gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"):
        plan = sample_plan("aws", variant)
        server = written_files(render_bootstrap(plan, "aws", options_for(plan)))[
            "/etc/systemd/system/inferstack-server.service"]
        for marker in ("api-key", "API_KEY", "restricted-api", "inferstack-api-key"):
            assert marker not in server, (variant, marker)


def test_local_nvme_is_used_when_the_plan_has_it() -> None:
    with_nvme, without = sample_plan("aws", "gpu-llm"), sample_plan("gcp", "gpu-llm")
    settings = {p.cloud: settings_of(render_bootstrap(p, p.cloud, options_for(p))) for p in (with_nvme, without)}
    assert settings["aws"]["NVME_EXPECTED"] == "1" and settings["gcp"]["NVME_EXPECTED"] == "0"


#### Bad input ####


def test_triton_native_is_refused_naming_the_field_and_the_fix() -> None:
    plan = sample_plan("aws", "cpu-encoder")
    with pytest.raises(InputError, match=r"options.install_mode: triton has no native install .*Fix: use "
                                         r"install_mode='container'"):
        render_bootstrap(plan, "aws", options_for(plan, "native"))


def test_native_llama_cpp_is_refused_for_a_plan_that_counts_several_requests_at_once() -> None:
    """llama-cpp-python serves one request at a time: the plan's capacity would not be there. The container's
    llama-server serves the slots, and a plan of one slot runs natively."""
    plan = sample_plan("aws", "cpu-llm")
    assert plan.serving.max_num_seqs == 4
    with pytest.raises(InputError, match=r"options.install_mode: llama.cpp's native install \(llama-cpp-python\) "
                                         r"serves one request at a time per process, and the plan counts 4 at once "
                                         r"\(serving.max_num_seqs\) \(got 'native'\). Fix: use install_mode="
                                         r"'container' or 'auto'"):
        render_bootstrap(plan, "aws", options_for(plan, "native"))
    several = plan.model_copy(update={"serving": plan.serving.model_copy(update={"processes": 2})})
    for mode in ("auto", "native"):  # natively either way, for the NUMA binding (container mode refuses them)
        with pytest.raises(InputError, match=r"plan.serving.max_num_seqs: .*the plan counts 4 at once .*its 2 "
                                             r"processes run natively .*\(got 4\). Fix: plan it again"):
            render_bootstrap(several, "aws", options_for(several, mode))
    assert settings_of(render_bootstrap(plan, "aws", options_for(plan)))["INSTALL_MODE"] == "container"
    single = one_at_a_time(plan)
    assert settings_of(render_bootstrap(single, "aws", options_for(single, "native")))["INSTALL_MODE"] == "native"


def test_a_cloud_other_than_the_plans_is_refused() -> None:
    plan = sample_plan("aws", "gpu-llm")
    with pytest.raises(InputError, match=r"cloud: does not match the plan's cloud 'aws' \(got 'gcp'\)"):
        render_bootstrap(plan, "gcp", options_for(plan))


@pytest.mark.parametrize("bucket", ["models; rm -rf /", "models$(id)", "a b", "x\ny", "u@attacker.example/x",
                                    "attacker.example:443", "../bucket", "Bucket"])
def test_a_bucket_that_is_no_bucket_name_is_refused_before_rendering(bucket: str) -> None:
    with pytest.raises(ValidationError, match="model_bucket"):
        BootstrapOptions(model_bucket=bucket, region="ap-southeast-1")


@pytest.mark.parametrize(("cloud", "bucket"), [("alibaba", "my.models"), ("alibaba", "my_models"),
                                               ("aws", "my_models"), ("aws", "192.168.1.10"),
                                               ("huawei", "my..models"), ("gcp", "goog-models")])
def test_a_bucket_name_the_cloud_refuses_is_refused_naming_the_cloud(cloud: str, bucket: str) -> None:
    plan = sample_plan(cloud, "cpu-llm")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=rf"options\.model_bucket: is not a bucket name that {cloud} accepts"):
        render_bootstrap(plan, cloud, BootstrapOptions(model_bucket=bucket, region=plan.region))


@pytest.mark.parametrize(("field", "value"), [
    ("region", "us-east-1\nDEVICE=gpu"), ("api_key_secret", "-rf"), ("api_key_secret", "a b"),
    ("hub_token_secret", "x;reboot"), ("storage_endpoint", "http://attacker.example"),
    ("secret_endpoint", "https://kms.example/$(id)"), ("metadata_endpoint", "file:///etc/passwd")])
def test_option_values_that_could_reach_a_shell_or_leak_a_token_are_refused(field: str, value: str) -> None:
    with pytest.raises(ValidationError, match=field):
        BootstrapOptions(**{"model_bucket": "bucket", "region": "us-east-1", field: value})  # type: ignore[arg-type]


def test_vllm_on_a_cpu_server_is_refused() -> None:
    plan = sample_plan("aws", "cpu-llm")
    plan = plan.model_copy(update={"serving": plan.serving.model_copy(update={"runtime": "vllm"}),
                                   "model": plan.model.model_copy(update={"artifact_format": "safetensors"})})
    with pytest.raises(InputError, match=r"plan\.serving\.runtime: vllm does not run on cpu servers"):
        render_bootstrap(plan, "aws", options_for(plan))


def test_the_shipped_programs_run_without_their_docstrings(tmp_path: Path) -> None:
    from inferstack.bootstrap.render import shipped_copy

    for name in ("cloud_access.py", "model_sync.py", "fetch_secret.py", "fetch_bundle.py"):
        (tmp_path / name).write_text(shipped_copy(name))
    for program in ("model_sync.py", "fetch_secret.py"):
        result = subprocess.run(["python3", str(tmp_path / program), "--help"], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert "--cloud" in result.stdout
