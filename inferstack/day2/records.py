"""What `inferstack status` and `inferstack logs` return: plain, frozen records that the CLI prints as tables or JSON.

A cloud module fills what its API says (servers, groups, the load balancer's view, log lines); `inferstack.day2.status`
adds what the plan says beside it (the floor and ceiling, the canary's weight, the price) and the hours this month.
"""

from __future__ import annotations

import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from inferstack.plan import Money

GroupRole = Literal["main", "canary", "servers"]
"""main: the fleet's group; canary: the canary's group behind the same load balancer; servers: the loose servers of a
plan without a fleet (validation and internal stages)."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Server(_Record):
    """One server as the cloud's API reports it."""

    id: str = Field(description="The cloud's instance id.")
    state: str = Field(description="The machine's state in the cloud's own words (EC2: pending, running, stopped ...).")
    launched_at: datetime.datetime = Field(description="When the machine last started (UTC): the start of its "
                                                       "current billing.")
    in_service: bool = Field(description="Serving: in its group's service (Auto Scaling: InService), or a loose "
                                         "server that is running.")
    billed: bool = Field(description="The cloud bills its machine time in this state (EC2: running only).")
    healthy: bool | None = Field(description="Its group's health check (a fleet: the load balancer's, after the "
                                             "grace); a loose server's machine status checks (the machine, not the "
                                             "model). None: not reported yet.")
    revision: str | None = Field(description="What it was launched from: the launch template version (AWS); None "
                                             "for a loose server.")
    zone: str | None = None


class GroupStatus(_Record):
    """A group of servers: what the cloud says, then (filled by status.py) what the plan says and what it cost."""

    role: GroupRole
    name: str = Field(description="The group's name in the cloud (the loose servers' Name tag pattern).")
    desired: int = Field(description="Servers the group holds now (the autoscaler's choice between min and max); "
                                     "for loose servers, the plan's count.")
    min_size: int | None = Field(default=None, description="The group's floor in the cloud; None for loose servers.")
    max_size: int | None = Field(default=None, description="The group's ceiling in the cloud; None for loose servers.")
    template: str | None = Field(default=None, description="What new servers launch from: the launch template "
                                                           "the group names (AWS).")
    revision: str | None = Field(default=None, description="The template's version the group names: a server "
                                                           "launched from another is of an earlier (or later) "
                                                           "deployment.")
    servers: list[Server] = Field(default=[])
    planned_min: int | None = Field(default=None, description="The plan's floor (fleet.min_replicas, or its count).")
    planned_max: int | None = Field(default=None, description="The plan's ceiling (fleet.max_replicas).")
    hourly_price: Money | None = Field(default=None, description="The plan's price of one server per hour.")
    server_hours_this_month: float = Field(default=0.0, description="Hours the servers running now have run since "
                                                                    "the month began (UTC).")
    cost_this_month: Money | None = Field(default=None, description="server_hours_this_month x hourly_price.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def in_service(self) -> int:
        return sum(server.in_service for server in self.servers)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def healthy(self) -> int:
        return sum(bool(server.in_service and server.healthy) for server in self.servers)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def on_other_revision(self) -> int:
        """Servers launched from another template version than the group's: a rollout not yet finished (or
        stopped)."""
        return sum(None not in (server.revision, self.revision) and server.revision != self.revision
                   for server in self.servers)


class TargetGroupHealth(_Record):
    """The load balancer's view of one group's servers: how many targets are in each health state."""

    role: GroupRole
    name: str
    states: dict[str, int] = Field(description="Targets per state (ELB: healthy, unhealthy, initial, draining, "
                                               "unused, unavailable).")
    problems: list[str] = Field(default=[], description="Why targets are not healthy, as the load balancer says, "
                                                        "one line per target (at most MAX_PROBLEMS_SHOWN).")


class LoadBalancerStatus(_Record):
    name: str
    state: str = Field(description="The load balancer's own state (ELB: provisioning, active, failed ...).")
    address: str | None = Field(description="Its DNS name: where the API domain must point.")
    targets: list[TargetGroupHealth]
    canary_weight_percent: int | None = Field(description="The share of requests the listener sends to the "
                                                          "canary's group; None without a canary.")


class StatusReport(_Record):
    """`inferstack status STACK`."""

    stack: str
    project: str
    cloud: str
    region: str
    checked_at: datetime.datetime
    plan_source: str = Field(description="Where the plan beside the figures comes from (the stack's pin ...).")
    plan_summary: str
    model: str
    model_revision: str | None = Field(description="The model revision the plan deploys (the workload's "
                                                   "model.revision); the servers report none of their own.")
    planned_canary_weight_percent: int | None
    monthly_cost: Money | None = Field(description="The plan's month (730 h) of its floor, the canary's included: "
                                                   "what it costs at its floor all month.")
    groups: list[GroupStatus]
    load_balancer: LoadBalancerStatus | None
    server_hours_this_month: float
    cost_this_month: Money | None = Field(description="The groups' cost_this_month added (None when a price is "
                                                      "unknown).")
    cost_includes: str = Field(description="What cost_this_month counts, and what it leaves out.")
    notes: list[str] = Field(description="Where what runs differs from the plan, and what could not be read.")


class LogLine(_Record):
    timestamp: datetime.datetime
    source: str = Field(description="Which server and which log (the log stream: <instance id>/<file or unit>).")
    message: str


class LogsReport(_Record):
    """`inferstack logs STACK`: the newest lines, newest last."""

    stack: str
    cloud: str
    log_group: str = Field(description="Where they were read: the deployment's log group (CloudWatch Logs).")
    since: datetime.datetime
    until: datetime.datetime
    limit: int
    lines: list[LogLine]
    more_before: bool = Field(description="Older lines of the window were left out: the limit was reached.")
