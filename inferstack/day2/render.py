"""`inferstack status` and `inferstack logs` for people: a few lines per group (wrapped to the terminal between words,
never inside an id), then the load balancer, the month's figures and where the deployment differs from its plan. Log
lines go to stdout as they are, one per line, with a header on stderr, so that they can be piped."""

from __future__ import annotations

import sys

from inferstack.day2.records import GroupStatus, LoadBalancerStatus, LogsReport, StatusReport
from inferstack.report import console, wrapped

TIME_FORMAT = "%Y-%m-%d %H:%M UTC"


def print_status(report: StatusReport) -> None:
    revision = f", revision {report.model_revision}" if report.model_revision else ""
    _say([f"Stack {report.stack} (project {report.project}) on {report.cloud} {report.region}, checked "
          f"{report.checked_at.strftime(TIME_FORMAT)}",
          f"Plan ({report.plan_source}): {report.plan_summary}",
          f"Model {report.model}{revision} (as the plan deploys it)", ""])
    for group in report.groups:
        _say(_group_lines(group))
    if report.load_balancer is not None:
        _say(["", *_load_balancer_lines(report.load_balancer, report.planned_canary_weight_percent)])
    cost = f", {report.cost_this_month} at the plan's price" if report.cost_this_month else ""
    monthly = f"; the plan costs {report.monthly_cost} a month at its floor" if report.monthly_cost else ""
    _say(["", f"This month: {report.server_hours_this_month:,.2f} server-hours{cost}{monthly}.",
          f"  Counted: {report.cost_includes}."])
    if report.notes:
        _say(["", "Differences from the plan:", *(f"  - {note}" for note in report.notes)])


def _group_lines(group: GroupStatus) -> list[str]:
    planned = f" (plan {group.planned_min}..{group.planned_max})" if group.planned_min is not None else ""
    size = f"; size {group.min_size}..{group.max_size}{planned}" if group.min_size is not None else planned
    lines = [f"{group.role} {group.name}: {group.desired} desired, {group.in_service} in service, {group.healthy} "
             f"healthy{size}"]
    if group.template and group.revision:
        others = f", {group.on_other_revision} on another" if group.on_other_revision else ""
        lines.append(f"  launches from {group.template} version {group.revision} "
                     f"({len(group.servers) - group.on_other_revision} servers on it{others})")
    price = f" at {group.hourly_price}/hour" if group.hourly_price else ""
    cost = f", {group.cost_this_month}{price}" if group.cost_this_month else " (unpriced)"
    lines.append(f"  this month: {group.server_hours_this_month:,.2f} server-hours{cost}")
    return lines


def _load_balancer_lines(balancer: LoadBalancerStatus, planned_weight: int | None) -> list[str]:
    lines = [f"Load balancer {balancer.name} ({balancer.state}) at {balancer.address or 'no address yet'}"]
    for target_group in balancer.targets:
        states = ", ".join(f"{count} {state}" for state, count in sorted(target_group.states.items())) or "no targets"
        lines.append(f"  {target_group.role} targets ({target_group.name}): {states}")
        lines += [f"    {problem}" for problem in target_group.problems]
    if balancer.canary_weight_percent is not None:
        plan = f" (plan: {planned_weight} %)" if planned_weight is not None else " (the plan has no canary)"
        lines.append(f"  canary weight: {balancer.canary_weight_percent} %{plan}")
    return lines


def print_logs(report: LogsReport) -> None:
    more = " (the limit: older lines of the window were left out)" if report.more_before else ""
    sys.stderr.write(f"# {len(report.lines)} lines of {report.log_group} from {report.since.strftime(TIME_FORMAT)} to "
                     f"{report.until.strftime(TIME_FORMAT)}, newest last{more}\n")
    sys.stdout.writelines(f"{line.timestamp.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z {line.source} {line.message}\n"
                          for line in report.lines)


def _say(lines: list[str]) -> None:
    console.out("\n".join(wrapped(lines)), highlight=False)
