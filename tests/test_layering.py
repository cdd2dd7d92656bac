"""Data flows one way: spec → sizing → plan → (bootstrap, components). The pure layers never import Pulumi."""

import subprocess
import sys


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
