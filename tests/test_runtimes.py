"""The runtime registry (inferstack/runtimes.py): one entry per runtime, and each runtime's facts in that one place."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import get_args

import pytest

from inferstack.bootstrap.runtimes import COMMANDS, RUNTIME_PORT
from inferstack.runtimes import RUNTIME_FACTS, ArtifactFormat, Backend, HealthPath, Runtime, runtime_for_engine
from inferstack.sizing.planner import PLANNABLE_ENGINES
from inferstack.spec import Engine

ROOT = Path(__file__).resolve().parents[1]
EXPOSED = json.loads((ROOT / "tests" / "data" / "runtime_metric_names.json").read_text(encoding="utf-8"))

RUNTIME_IDS = frozenset(get_args(Runtime))
ALLOWED_PER_RUNTIME_LITERALS = {
    "inferstack/runtimes.py": "the registry itself",
}
"""Where a literal keyed by (or listing) runtime ids, or a comparison with one, may be written, and why; `tests/` is
not scanned."""


def test_the_registry_has_one_entry_per_runtime_of_the_literal_in_its_order() -> None:
    assert tuple(RUNTIME_FACTS) == get_args(Runtime)
    assert all(facts.id == runtime for runtime, facts in RUNTIME_FACTS.items())


@pytest.mark.parametrize("runtime", sorted(RUNTIME_IDS))
def test_each_runtimes_plan_values_are_ones_a_plan_accepts(runtime: str) -> None:
    facts = RUNTIME_FACTS[runtime]
    assert facts.health_path in get_args(HealthPath)
    assert facts.artifact_format in get_args(ArtifactFormat)
    assert {facts.backend_gpu, facts.backend_cpu} <= {None, *get_args(Backend)}
    assert facts.metrics_port is None or (1024 <= facts.metrics_port <= 65535 and facts.metrics_port != RUNTIME_PORT)
    assert facts.gpu_memory_fraction is None or 0 < facts.gpu_memory_fraction <= 1


def test_every_engine_the_planner_plans_is_served_by_exactly_one_runtime() -> None:
    served = [engine for facts in RUNTIME_FACTS.values() for engine in facts.engines]
    assert len(served) == len(set(served)) and set(served) <= {engine.value for engine in Engine}
    for engine in PLANNABLE_ENGINES:
        if engine is not Engine.AUTO:
            assert engine.value in runtime_for_engine(engine.value).engines
    assert runtime_for_engine("onnxruntime").id == "triton"
    with pytest.raises(ValueError, match="no runtime serves engine 'trtllm'"):
        runtime_for_engine("trtllm")


@pytest.mark.parametrize("runtime", sorted(RUNTIME_IDS))
def test_each_runtime_runs_somewhere_and_its_native_install_is_complete(runtime: str) -> None:
    facts = RUNTIME_FACTS[runtime]
    assert facts.image_gpu or facts.image_cpu or facts.native_devices
    if facts.native is not None:
        native = facts.native
        assert native.devices and native.pip_requirement.replace("_", "-").startswith(
            native.pip_distribution.replace("_", "-")) and native.pip_version in native.pip_requirement
        if native.shipped:  # the bundle carries it from the server's programs
            assert resources.files("inferstack.bootstrap").joinpath("files", native.program).is_file()
        else:
            assert re.fullmatch(r"[a-z_][a-z0-9_.]*", native.program)


def test_auto_installs_in_a_container_but_several_cpu_processes_natively_where_they_can() -> None:
    assert RUNTIME_FACTS["llamacpp"].auto_mode("cpu", 2) == "native"
    assert RUNTIME_FACTS["llamacpp"].auto_mode("cpu", 1) == "container"
    assert RUNTIME_FACTS["llamacpp"].auto_mode("gpu", 2) == "container"
    assert RUNTIME_FACTS["triton"].auto_mode("cpu", 2) == "container"  # no native install


def test_every_runtime_has_the_bootstraps_command_line() -> None:
    assert set(COMMANDS) == set(RUNTIME_FACTS)
    assert all(command.runtime is RUNTIME_FACTS[runtime] for runtime, command in COMMANDS.items())


@pytest.mark.parametrize("runtime", sorted(RUNTIME_IDS))
def test_each_runtimes_key_metrics_are_names_its_pinned_build_exposes(runtime: str) -> None:
    # A series no exposed name matches sends nothing, silently (vllm:gpu_cache_usage_perc, gone in vLLM 0.12.0).
    key_metrics = RUNTIME_FACTS[runtime].key_metrics
    assert key_metrics and set(key_metrics) <= set(EXPOSED[runtime]["names"])


@pytest.mark.parametrize("runtime", sorted(RUNTIME_IDS))
def test_each_runtime_serves_its_api_and_caches_only_routes_of_it(runtime: str) -> None:
    facts = RUNTIME_FACTS[runtime]
    assert facts.api_prefixes and all(prefix.startswith("/") for prefix in facts.api_prefixes)
    for route in (*facts.cache_deterministic_prefixes, *facts.cache_completion_routes):
        assert route.startswith(facts.api_prefixes), route  # the gateway forwards it, so the cache may see it
    assert not facts.health_path.startswith(facts.api_prefixes)  # the key-free route is no inference route


def test_the_runtime_registry_imports_nothing_but_the_standard_library() -> None:
    code = ("import sys, inferstack.runtimes; "
            "print(sorted(m for m in sys.modules if m.startswith(('inferstack.', 'pulumi', 'pydantic'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "['inferstack.runtimes']"


#### Each runtime's facts in one place ####


def per_runtime_literals(source: str) -> list[tuple[int, list[str]]]:
    """The line and runtime ids of each literal that keys or lists two or more runtimes (a dict display, a
    `dict(vllm=...)` call, a set, tuple or list display), and of each comparison with a runtime id (an if-chain on
    the id). A `Literal[...]` type is not one: the registry's `Runtime` is where the ids are declared."""
    tree = ast.parse(source)
    in_literal_type = {id(inner) for node in ast.walk(tree)
                       if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                       and node.value.id == "Literal" for inner in ast.walk(node.slice)}
    found = []
    for node in ast.walk(tree):
        least = 2
        if isinstance(node, ast.Dict):
            names = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        elif isinstance(node, (ast.Set, ast.Tuple, ast.List)) and id(node) not in in_literal_type:
            names = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            names = [k.arg for k in node.keywords]
        elif isinstance(node, ast.Compare):
            names, least = [o.value for o in (node.left, *node.comparators) if isinstance(o, ast.Constant)], 1
        else:
            continue
        runtimes = sorted({n for n in names if isinstance(n, str) and n in RUNTIME_IDS})
        if len(runtimes) >= least:
            found.append((node.lineno, runtimes))
    return found


def production_sources() -> list[Path]:
    skipped = ("tests", "benchmarks", "docs", "examples", "stacks")
    return [path for path in sorted(ROOT.rglob("*.py"))
            if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
            and path.relative_to(ROOT).parts[0] not in skipped]


def allowed(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return any(relative == place or relative.startswith(f"{place}/") for place in ALLOWED_PER_RUNTIME_LITERALS)


def test_the_scan_finds_a_literal_keyed_by_runtimes_and_an_if_on_one_and_passes_other_literals() -> None:
    assert per_runtime_literals('PORTS = {"vllm": 8000, "triton": 8002}') == [(1, ["triton", "vllm"])]
    assert per_runtime_literals('NATIVE = frozenset({"vllm", "llamacpp"})') == [(1, ["llamacpp", "vllm"])]
    assert per_runtime_literals('WARMUP = dict(vllm=90, llamacpp=0)') == [(1, ["llamacpp", "vllm"])]
    assert per_runtime_literals('if runtime == "triton":\n    port = 8002') == [(1, ["triton"])]
    assert per_runtime_literals('Runtime = Literal["vllm", "llamacpp", "triton"]') == []
    assert per_runtime_literals('IMAGE = {"vllm": "vllm/vllm-openai"}; NAMES = ["tritonserver", "vllm-openai"]') == []


def test_no_production_module_outside_the_registry_keys_facts_by_runtime() -> None:
    """Each runtime's facts live in inferstack/runtimes.py (RUNTIME_FACTS): read them from its entry, or add the fact
    to the registry, instead of writing a literal keyed by runtime ids or an if-chain on one."""
    sources = production_sources()
    assert ROOT / "inferstack" / "sizing" / "planner.py" in sources  # the scan looks where the facts were spread
    found = [f"{path.relative_to(ROOT)}:{line} {runtimes}" for path in sources if not allowed(path)
             for line, runtimes in per_runtime_literals(path.read_text(encoding="utf-8"))]
    assert found == []
