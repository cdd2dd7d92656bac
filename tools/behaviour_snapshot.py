"""Everything inferstack decides, written to one folder, so that a refactoring can show it changed nothing.

    python tools/behaviour_snapshot.py OUT_DIR        # then, after the change: ... OTHER_DIR; diff -r OUT_DIR OTHER_DIR

It writes, on a fixed run date (INFERSTACK_TODAY, as the tests use):
- `plan/<workload>.json`: `inferstack plan WORKLOAD --json` of every example workload, on every cloud;
- `preview/<workload>-<cloud>-<stage>.json`: what the components register for its plan on each cloud at each stage
  (every resource's type, name, parent, inputs in wire form, protect, ignoreChanges, provider), under Pulumi's mocks,
  with the stack config every cloud needs to create everything (tests/components/conftest.py);
- `stack/<stack>.json`: the same for each stack file in stacks/ (its pin, or its workload sized);
- `bootstrap/<workload>-<cloud>-<stage>.txt`: the user data and the boot bundle of each plan.

Byte-identical folders before and after a change mean: the same plans, the same resources, the same servers.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("INFERSTACK_TODAY", "2026-12-01")
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import yaml  # noqa: E402

from inferstack.preview import PreviewResult, preview_deployment, preview_stack  # noqa: E402
from inferstack.sizing.planner import plan_workload  # noqa: E402
from inferstack.spec import CLOUDS, STAGES, load_workload  # noqa: E402
from tests.components.conftest import CLOUD_ARGS, STACK_CONFIG  # noqa: E402

SECRETS = {"inferstack:apiKey": "snapshot-api-key", "inferstack:hubToken": "snapshot-hub-token"}
CACHE_TOKEN = {"inferstack:cacheAuthToken": "Cache-token_0123456789+ab="}  # where a plan has a cache and the cloud
# takes a token (Memorystore makes its own)
CONFIG_KEYS = {"api_domain": "inferstack:apiDomain", "api_certificate": "inferstack:apiCertificate",
               "assets_domain": "inferstack:assetsDomain", "assets_certificate": "inferstack:assetsCertificate"}


def _resources(result: PreviewResult) -> list[dict[str, Any]]:
    return [{"type": r.type, "name": r.name, "parent": r.parent, "inputs": r.raw_inputs, "protect": r.protect,
             "ignore_changes": list(r.ignore_changes), "provider": r.provider} for r in result.resources]


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = data if isinstance(data, str) else json.dumps(data, indent=1, sort_keys=True, default=str)
    path.write_text(text + "\n", encoding="utf-8")


def _cloud_config(cloud: str, cache: bool) -> dict[str, Any]:
    token = CACHE_TOKEN if cache and cloud != "gcp" else {}
    return {**STACK_CONFIG, **SECRETS, **token, **{CONFIG_KEYS[key]: value for key, value in CLOUD_ARGS[cloud].items()}}


def snapshot(out: Path) -> None:
    from inferstack.bootstrap import BootstrapOptions, render_bootstrap

    for workload_file in sorted((ROOT / "examples" / "workloads").glob("*.yaml")):
        workload = load_workload(workload_file)
        report = plan_workload(workload, clouds=list(CLOUDS))
        _write(out / "plan" / f"{workload_file.stem}.json", report.model_dump(mode="json"))
        for cloud in CLOUDS:
            for stage in STAGES:
                staged = workload.model_copy(update={"stage": stage})
                plan = plan_workload(staged, clouds=[cloud]).outcome(cloud).chosen
                case = f"{workload_file.stem}-{cloud}-{stage}"
                if plan is None:
                    _write(out / "preview" / f"{case}.json", "infeasible")
                    continue
                rendered = render_bootstrap(plan, cloud, BootstrapOptions(model_bucket="snapshot-models",
                                                                          region=plan.region))
                _write(out / "bootstrap" / f"{case}.txt", rendered.user_data + "\n" + rendered.bundle)
                config = _cloud_config(cloud, plan.cache is not None)
                try:
                    _write(out / "preview" / f"{case}.json", _resources(preview_deployment(plan, config)))
                except Exception as error:  # a plan the components refuse: the refusal is the behaviour
                    _write(out / "preview" / f"{case}.json", f"refused: {error}")
    os.chdir(ROOT)  # the stacks name their files relative to the project
    for stack_file in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        if stack_file.name.endswith(".plan.json"):
            continue
        stack = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
        config = yaml.safe_load(stack_file.read_text())["config"]
        cloud = config["inferstack:cloud"]
        workload = config.get("inferstack:workload") or {}
        given = {**_cloud_config(cloud, "cache" in workload), **config}
        try:
            _write(out / "stack" / f"{stack}.json", _resources(preview_stack(given, stack=stack)))
        except Exception as error:  # a stack the program refuses: the refusal is the behaviour
            _write(out / "stack" / f"{stack}.json", f"refused: {error}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/behaviour_snapshot.py OUT_DIR")
    snapshot(Path(sys.argv[1]))
