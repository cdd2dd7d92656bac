"""Day 2: what a deployed stack runs and what its servers log, from the stack file and the cloud's own API.

    from inferstack.day2 import logs, status
    report = status(Path("stacks/Pulumi.aws-prod.yaml"))       # StatusReport: groups, health, revision, canary, cost
    lines = logs(Path("stacks/Pulumi.aws-prod.yaml"), since=timedelta(hours=1), limit=200)
    rollout(Path("stacks/Pulumi.huawei-prod.yaml"))           # old servers replaced in batches (Huawei AS)

`inferstack status STACK` and `inferstack logs STACK` print them (docs/day2.md). The stack file gives the cloud, the
region, the tags that find the resources and the plan to compare with (stack.py); one module per cloud, named after
it, asks that cloud, with the same names in the same order:

    UNAVAILABLE            None, or why the cloud cannot be asked yet (the command says it, with where to look)
    LOGS_UNAVAILABLE       (optional) why `logs` has nothing to read where `status` can ask
    connect(region)        the SDK's clients, from the environment's credentials
    observe(clients, stack)                 its groups (GroupStatus) and load balancer (LoadBalancerStatus)
    log_group(clients, stack)               where its servers' logs are
    log_lines(clients, group, start, end, keep)   the newest `keep` lines of a window, oldest first

status.py adds the plan's figures and the hours this month; logs.py reads a window's newest lines; records.py holds
what both return; render.py prints them for people. The SDKs come with the `day2` extra (pip install
'inferstack[day2]'); nothing here imports Pulumi.
"""

from __future__ import annotations

import datetime
import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from inferstack.clouds import CLOUD_FACTS
from inferstack.day2.logs import MAX_LIMIT, newest_lines
from inferstack.day2.records import LogsReport, StatusReport
from inferstack.day2.rollout import POLL_S, RolloutResult, roll
from inferstack.day2.stack import CloudQueryError, read_deployed_stack
from inferstack.day2.status import assess
from inferstack.errors import input_error

ROLLOUT_TIMEOUT_COLD_STARTS = 2
"""How long a rollout batch may take to serve (and as long again to go), in the plan's cold starts: the estimate is
rough (plan.cold_start says which phases are assumptions), so twice it before the rollout stops."""


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def status(stack_file: Path, *, now: datetime.datetime | None = None) -> StatusReport:
    """What the stack runs now, beside its plan."""
    stack = read_deployed_stack(stack_file)
    cloud = _cloud_module(stack.cloud, "inferstack status")
    groups, load_balancer = cloud.observe(cloud.connect(stack.region), stack)
    return assess(stack, groups, load_balancer, now or utc_now())


def logs(stack_file: Path, *, since: datetime.timedelta, limit: int,
         now: datetime.datetime | None = None) -> LogsReport:
    """The newest `limit` lines its servers logged in the last `since`, newest last."""
    if not 1 <= limit <= MAX_LIMIT:
        raise input_error("--limit", f"must be 1 to {MAX_LIMIT}", value=limit,
                          fix="narrow --since instead of asking for more lines")
    stack = read_deployed_stack(stack_file)
    cloud = _cloud_module(stack.cloud, "inferstack logs")
    clients = cloud.connect(stack.region)
    group = cloud.log_group(clients, stack)
    until = now or utc_now()
    lines, more_before = newest_lines(lambda start, end, keep: cloud.log_lines(clients, group, start, end, keep),
                                      until - since, until, limit)
    return LogsReport(stack=stack.stack, cloud=stack.cloud, log_group=group, since=until - since, until=until,
                      limit=limit, lines=lines, more_before=more_before)


def rollout(stack_file: Path, *, timeout_s: float | None = None, poll_s: float = POLL_S,
            say: Callable[[str], None] = print) -> list[RolloutResult]:
    """Replace the servers of a deployed fleet that run an old configuration, in batches of the plan's surge
    (rollout.py), where the cloud's group does not do it itself; [] where it does (nothing to do)."""
    stack = read_deployed_stack(stack_file)
    facts = CLOUD_FACTS[stack.cloud]
    if facts.rolling_update:
        say(f"{facts.display_name}'s group replaces its servers itself when pulumi up changes their template "
            "(capability rolling-update): nothing to do")
        return []
    if not facts.rollout_command:
        raise CloudQueryError(f"inferstack rollout does not drive {facts.display_name}'s groups yet. Fix: replace the "
                              f"servers by hand as docs/deploy-{stack.cloud}.md says (rolling-update): raise the "
                              "group's desired count by the plan's surge, wait for the new servers to serve, lower it")
    if stack.plan.fleet is None:
        raise CloudQueryError(f"stack {stack.stack} deploys one server, not a fleet: pulumi up replaces it")
    cloud = importlib.import_module(f"{__name__}.{stack.cloud}")
    groups = cloud.scaling_groups(cloud.connect(stack.region), stack)
    results = []
    for role, group in groups.items():  # each group by its own plan: its surge, its servers' cold start
        plan = stack.plan.canary.plan if role == "canary" and stack.plan.canary else stack.plan
        wait_s = timeout_s or ROLLOUT_TIMEOUT_COLD_STARTS * (plan.fleet or stack.plan.fleet).cold_start_s
        results.append(roll(group, plan.rolling_update.surge, wait_s, poll_s=poll_s, say=say))
    return results


def _cloud_module(cloud: str, command: str) -> ModuleType:
    """The cloud's module (`inferstack.day2.<cloud>`), or the error that says why it cannot be asked yet (a module
    whose servers ship no logs says so in LOGS_UNAVAILABLE)."""
    module = importlib.import_module(f"{__name__}.{cloud}")
    unavailable = module.UNAVAILABLE
    if command == "inferstack logs" and unavailable is None:
        unavailable = getattr(module, "LOGS_UNAVAILABLE", None)
    if unavailable is not None:
        raise CloudQueryError(f"{command} cannot ask {CLOUD_FACTS[cloud].display_name} yet: {unavailable}")
    return module
