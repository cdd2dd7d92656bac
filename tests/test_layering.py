"""Data flows one way: spec → sizing → plan → (bootstrap, components). The pure layers never import Pulumi."""

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
