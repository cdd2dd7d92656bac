"""Data flows one way: spec → sizing → plan → (bootstrap, components). The pure layers never import Pulumi."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_spec_sizing_plan_and_bootstrap_do_not_import_pulumi():
    code = (
        "import sys, inferstack.spec, inferstack.sizing, inferstack.plan, inferstack.sizing.estimate, "
        "inferstack.bootstrap, inferstack.cli, inferstack.diff; "
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('pulumi')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_cloud_registry_imports_nothing_but_the_standard_library():
    code = ("import sys, inferstack.clouds; "
            "print(sorted(m for m in sys.modules if m.startswith(('inferstack.', 'pulumi', 'pydantic'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "['inferstack.clouds']"


def test_plan_json_runs_without_the_table_simulation_calibration_or_package_metadata_modules():
    # Start-up time of `inferstack plan --json` (benchmarks/plan_speed.py): rich draws tables, simpy simulates,
    # calibration.py builds pydantic models only --calibration needs, and importlib.metadata (which pydantic
    # imports to look for plugins the CLI disables) stays a placeholder.
    code = (
        "import contextlib, io, sys\n"
        "from inferstack.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['plan', 'examples/workloads/chat-8b-public.yaml', '--json'])\n"
        "loaded = [m for m in ('rich', 'simpy', 'email', 'inferstack.sizing.calibration') if m in sys.modules]\n"
        "print(loaded, 'distributions' in vars(sys.modules['importlib.metadata']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "[] False"


def test_package_metadata_still_loads_when_read():
    code = (
        "import inferstack.cli, importlib.metadata\n"
        "from importlib.metadata import version\n"
        "print(version('pydantic') == importlib.metadata.distribution('pydantic').version)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "True"


def test_importing_the_cli_leaves_the_garbage_collector_as_it_found_it():
    # The CLI pauses the collector while its imports run (start-up speed) and must switch it back on: a test run or
    # a program that imports inferstack.cli would otherwise never collect a reference cycle again.
    code = (
        "import gc, sys\n"
        "before = gc.isenabled()\n"
        "import inferstack.cli\n"
        "after = gc.isenabled()\n"
        "gc.disable()\n"
        "del sys.modules['inferstack.cli']\n"
        "import inferstack.cli\n"
        "print(before, after, gc.isenabled())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "True True False"


#### No import cycles: every import points down the layers ####

def _module_names() -> dict[str, Path]:
    """Every module of the package and of the benchmarks (run as scripts from their folder, as `fit`, `fidelity`)."""
    names = {}
    for path in sorted((ROOT / "inferstack").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        names[f"benchmarks.{path.stem}"] = path
    return names


def imports_of(module: str, path: Path, modules: set[str]) -> set[str]:
    """The project modules `module` imports anywhere in its source: at the top, inside functions (an import there
    only hides a cycle until the function runs) and under TYPE_CHECKING (a cycle of types is a cycle of design)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {m for alias in node.names if (m := known(alias.name))}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parents, *([base] if base else [])])
            elif module.startswith("benchmarks.") and f"benchmarks.{base}" in modules:
                base = f"benchmarks.{base}"  # a benchmark imports its neighbours as top-level modules
            found |= {m for alias in node.names if (m := known(f"{base}.{alias.name}") or known(base))}
    return found - {module}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_cycle_finder_finds_a_cycle_through_an_import_inside_a_function(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from inferstack.b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from inferstack.a import y\n")
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from inferstack.a import z\n")
    modules = {"inferstack.a", "inferstack.b", "inferstack.c"}
    graph = {m: imports_of(m, tmp_path / f"{m.rsplit('.', 1)[1]}.py", modules) for m in modules}
    assert graph["inferstack.c"] == {"inferstack.a"}
    assert import_cycles(graph) == [["inferstack.a", "inferstack.b"]]


def test_no_module_of_the_package_or_the_benchmarks_is_part_of_an_import_cycle() -> None:
    modules = _module_names()
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    assert import_cycles(graph) == [], "move what both modules need below them, or pass it as an argument"
