"""The pack's folder as Pulumi publishes it: the rules import only the standard library and each other, the Pulumi
wrappers add only pulumi_policy, no module is longer than a reader takes in at once, and no two import each other.

docs/policy.md says why: the pack's environment installs only policy/requirements.txt and a published pack ships
only policy/, while the components' invariant tests run the same rules in an environment without pulumi_policy.
"""

from __future__ import annotations

import ast
import graphlib
import sys
from pathlib import Path

import pytest

from tests.policy.harness import REPO

PACK = REPO / "policy"
RULES_PACKAGE = "guardrails"
MAX_LINES = 800
"""The house bar for a production file (issue 24): one a reader takes in at once."""
WRAPPERS_MAY_IMPORT = {"pulumi_policy"}
"""What the Pulumi wrappers (inferstack_policies.py, __main__.py) import beyond the rules: the policy SDK."""

MODULES = sorted(path for path in PACK.rglob("*.py")
                 if not any(part.startswith(".") for part in path.relative_to(PACK).parts))  # not policy/.venv


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACK).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PACK_MODULES = {_module_name(path) for path in MODULES}


def _imports(path: Path) -> set[str]:
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    return _imported(path.read_text(encoding="utf-8"), package)


def _imported(source: str, package: str) -> set[str]:
    """Every module a source imports, at the top or inside a function; relative imports resolved in `package`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parents, *([base] if base else [])])
            # `from guardrails import core` imports the module guardrails.core
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in PACK_MODULES else base
                      for alias in node.names}
    return found


def _foreign(imported: str, allowed: set[str]) -> bool:
    top = imported.split(".")[0]
    return not (top in sys.stdlib_module_names or top == "__future__" or imported in PACK_MODULES
                or top in allowed)


def test_the_layout_finds_the_rules_and_the_wrappers() -> None:
    assert {f"{RULES_PACKAGE}.ruleset", f"{RULES_PACKAGE}.core", "inferstack_policies", "__main__"} <= PACK_MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(PACK)))
def test_a_pack_module_imports_only_the_standard_library_and_the_pack(path: Path) -> None:
    in_rules = path.relative_to(PACK).parts[0] == RULES_PACKAGE
    foreign = sorted(m for m in _imports(path) if _foreign(m, set() if in_rules else WRAPPERS_MAY_IMPORT))
    assert not foreign, f"{path.relative_to(PACK.parent)} imports {foreign}: the pack ships alone (docs/policy.md)"


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(PACK)))
def test_no_pack_module_is_longer_than_the_house_bar(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACK.parent)} has {lines} lines: split it by concern"


def test_the_pack_modules_import_each_other_in_one_direction() -> None:
    graph = {_module_name(path): {m for m in _imports(path) if m in PACK_MODULES} - {_module_name(path)}
             for path in MODULES}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError, naming the circle


def test_the_import_scan_sees_a_foreign_import_even_inside_a_function() -> None:
    source = ("from guardrails import core\nfrom .networks import openings\nimport json\n\n"
              "def f():\n    import inferstack.plan\n    from pulumi_policy import PolicyPack\n")
    imported = _imported(source, RULES_PACKAGE)
    assert {f"{RULES_PACKAGE}.core", f"{RULES_PACKAGE}.networks", "json"} <= imported
    assert {m for m in imported if _foreign(m, set())} == {"inferstack.plan", "pulumi_policy"}
