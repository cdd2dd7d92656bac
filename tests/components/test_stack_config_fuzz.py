"""Stack config through the whole program, fuzzed (hypothesis): whatever a stack file holds, `pulumi up` either
deploys or stops with an error that names the config key (or the workload field), shows the value and says what
to do, never with a traceback; and what it deploys carries no hostile text into the servers' boot.

The program runs under Pulumi's mocks (`inferstack.preview.preview_stack`), as `pulumi up` would run it.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferstack.errors import InfeasibleError, InputError
from inferstack.preview import preview_stack

STACK = yaml.safe_load((Path(__file__).resolve().parents[2] / "stacks" / "Pulumi.aws-dev.yaml").read_text())["config"]
KEYS = ["inferstack:cloud", "inferstack:stage", "inferstack:allowedCidrs", "inferstack:staticAssets",
        "inferstack:assetsDomain", "inferstack:modelBucket", "inferstack:instanceIdentity", "inferstack:tags",
        "inferstack:workloadFile", "inferstack:planFile", "inferstack:pricesFile", "inferstack:protectServers",
        "inferstack:calibrationFile", "inferstack:noSuchKey"]
WORKLOAD_FIELDS = ["name", "model", "precision", "stage", "engine", "kv_cache_dtype"]
UNSAFE = re.compile(r"\$\(|`|;|\n|\.\./")

hostile_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["$(id>/tmp/p)", "`id`", "a;reboot", "x\nDEVICE=gpu", "../../../../srv/victim",
                     "u@attacker.example/x", "0.0.0.0/1", "::/0", "true", "null", "{}", "[]", "aws\n", "AWS"]),
)
hostile_value = st.one_of(hostile_text, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(),
                          st.lists(hostile_text, max_size=3), st.dictionaries(hostile_text, hostile_text, max_size=2))


def deploys_or_explains(config: dict[str, Any]) -> None:
    try:
        result = preview_stack(config, stack="fuzz")
    except InputError as error:
        assert error.problems and all(problem.fix for problem in error.problems), error
        return
    except InfeasibleError as error:
        assert "Fix:" in str(error)
        return
    boot = json.dumps([r.masked_inputs for r in result.resources])
    for value in config.values():
        text = value if isinstance(value, str) else json.dumps(value)
        # the boot script has `$(` of its own: hostile text must not appear more often than without it
        assert not (UNSAFE.search(text) and boot.count(text) > baseline_boot().count(text)), text


@functools.cache
def baseline_boot() -> str:
    """What the unfuzzed stack registers."""
    return json.dumps([r.masked_inputs for r in preview_stack(STACK, stack="fuzz").resources])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), value=hostile_value)
def test_a_hostile_stack_key_deploys_or_is_explained(key: str, value: Any) -> None:
    deploys_or_explains({**STACK, key: value})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(WORKLOAD_FIELDS), value=hostile_value)
def test_a_hostile_inline_workload_field_deploys_or_is_explained(field: str, value: Any) -> None:
    workload = {**STACK["inferstack:workload"], field: value}
    deploys_or_explains({**STACK, "inferstack:workload": workload})
