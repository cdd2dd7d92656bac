"""Workload specs: valid files load; bad input names the field, the value and the fix."""

from pathlib import Path

import pytest

from inferstack.errors import InputError
from inferstack.sizing.models import resolve
from inferstack.spec import Precision, load_workload, parse_workload

WORKLOADS = Path(__file__).resolve().parents[1] / "examples" / "workloads"
MINIMAL = {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 2}}


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
    with pytest.raises(InputError, match=r"precision: .*'fp16'.*\(got 'fp12'\)"):
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
