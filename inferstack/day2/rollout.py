"""Replacing a managed group's servers in batches, where the cloud's group does not do it itself (Huawei Auto
Scaling has no instance refresh: `CloudFacts.rolling_update`).

After `pulumi up` gives the group a new configuration (a new model revision, plan or boot script), only servers added
from then on take it. `inferstack rollout STACK` replaces the running ones the way the other clouds' groups do:
each batch raises the group's expected count by the plan's surge, waits until that many more servers of the group's
current configuration are in service and pass the load balancer's health check in each of the group's pools,
then lowers the count again by as many, and the group removes servers of an old configuration first (its
instance-termination policy, which the rollout checks before it starts). Never fewer healthy servers serve than
before the batch, and what the autoscaler set meanwhile is kept, except a scale-in below the count the batch
started from.

A batch that does not come up healthy within the timeout stops the rollout with the group as it is (the count
still raised, the old servers serving): lowering it then would remove old servers before new ones serve.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from inferstack.day2.stack import CloudQueryError

POLL_S = 15
"""How often the group is read while a batch comes up or goes down."""


@dataclass(frozen=True)
class GroupState:
    """A managed group's counts and configuration, as its cloud's API gives them."""

    name: str
    desired: int
    minimum: int
    maximum: int
    configuration: str
    """The configuration (template) new servers are created from."""
    removes_old_first: bool
    """Whether scale-in removes servers of an old configuration first."""


@dataclass(frozen=True)
class Member:
    """One server of the group."""

    id: str
    configuration: str
    serving: bool
    """In service, and taking traffic: healthy by the load balancer's health check in every pool of the group."""


class ScalingGroup(Protocol):
    """The three things a rollout needs of a cloud's group (day2/<cloud>.py implements it)."""

    def state(self) -> GroupState: ...

    def members(self) -> list[Member]: ...

    def set_desired(self, count: int) -> None: ...


@dataclass(frozen=True)
class Batch:
    replaced: int
    raised_to: int
    lowered_to: int
    seconds: float


@dataclass(frozen=True)
class RolloutResult:
    group: str
    configuration: str
    replaced: int
    batches: list[Batch]


class RolloutError(CloudQueryError):
    """The rollout stopped: what happened, where the group stands, and what to do."""


def roll(group: ScalingGroup, surge: int, timeout_s: float, *, poll_s: float = POLL_S,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
         say: Callable[[str], None] = print) -> RolloutResult:
    """Replace every server of `group` that runs an old configuration, `surge` at a time, each batch waiting at most
    `timeout_s` to come up healthy and as long again to go down."""
    if surge < 1:
        raise ValueError("surge must be at least 1")
    state = group.state()
    if not state.removes_old_first:
        raise RolloutError(f"group {state.name} does not remove servers of an old configuration first, so lowering "
                           "its count could remove new servers. Fix: set its instance-termination policy back with "
                           "pulumi up (the components set it)")
    outdated = _outdated(group.members(), state.configuration)
    say(f"{state.name}: {len(outdated)} server(s) on an old configuration, {state.desired} expected")
    batches: list[Batch] = []
    while outdated:
        count = min(surge, len(outdated), state.maximum - state.desired)
        if count < 1:
            raise RolloutError(f"group {state.name} is at its ceiling ({state.maximum} servers): there is no room to "
                               f"start a new server before an old one goes, and {len(outdated)} still run an old "
                               "configuration. Fix: rerun when traffic has let the autoscaler lower the count, or "
                               "raise scaling.max_replicas and pulumi up")
        waiting = _Waiting(timeout_s, poll_s, clock, sleep)
        batches.append(_batch(group, state, count, len(outdated), waiting))
        say(f"{state.name}: {count} replaced in {batches[-1].seconds:.0f} s, {len(outdated) - count} to go")
        state = group.state()
        outdated = _outdated(group.members(), state.configuration)
    return RolloutResult(group=state.name, configuration=state.configuration,
                         replaced=sum(batch.replaced for batch in batches), batches=batches)


@dataclass(frozen=True)
class _Waiting:
    timeout_s: float
    poll_s: float
    clock: Callable[[], float]
    sleep: Callable[[float], None]

    def until(self, done: Callable[[], bool], failure: str) -> None:
        deadline = self.clock() + self.timeout_s
        while not done():
            if self.clock() >= deadline:
                raise RolloutError(failure)
            self.sleep(self.poll_s)


def _batch(group: ScalingGroup, state: GroupState, count: int, outdated: int, waiting: _Waiting) -> Batch:
    """One batch: `count` more servers of the current configuration serving, then as many fewer in the group."""
    started = waiting.clock()
    fresh = len(_serving(group.members(), state.configuration))
    raised = state.desired + count
    group.set_desired(raised)
    try:
        return _finish_batch(group, state, count, outdated, waiting, fresh, raised, started)
    except RolloutError:
        raise
    except CloudQueryError as error:  # the API failed mid-batch: say where the group was left
        raise RolloutError(f"{error} (group {state.name}: this rollout had raised its expected count from "
                           f"{state.desired} to {raised}; rerun inferstack rollout once the API answers: it goes on "
                           "from the servers as they are)") from None


def _finish_batch(group: ScalingGroup, state: GroupState, count: int, outdated: int, waiting: _Waiting,
                  fresh: int, raised: int, started: float) -> Batch:
    waiting.until(lambda: len(_serving(group.members(), state.configuration)) >= fresh + count,
                  f"group {state.name}: {count} new server(s) did not serve within {waiting.timeout_s:.0f} s; the "
                  f"group stays at {raised} servers expected (raised from {state.desired} by this rollout), its old "
                  "servers serving. Fix: look at the new servers' boot (docs/deploy-huawei.md), then remove and "
                  "delete the new ones that do not serve (Auto Scaling console, the group's instances), which "
                  "lowers the count again, and rerun inferstack rollout. Do not lower the expected count: the group "
                  "removes old servers first, the ones serving")
    # What the autoscaler did meanwhile is kept, except a scale-in below the count before the batch (it may come
    # again once the batch is done): the rollout never leaves fewer servers than it found.
    lowered = max(group.state().desired - count, state.desired)
    group.set_desired(lowered)
    waiting.until(lambda: len(_outdated(group.members(), state.configuration)) <= outdated - count,
                  f"group {state.name}: the old servers were not removed within {waiting.timeout_s:.0f} s of "
                  f"lowering the expected count to {lowered}. Fix: look at the group's scaling activities in the "
                  "Auto Scaling console, then rerun inferstack rollout")
    return Batch(replaced=count, raised_to=raised, lowered_to=lowered, seconds=waiting.clock() - started)


def _outdated(members: Sequence[Member], configuration: str) -> list[Member]:
    return [member for member in members if member.configuration != configuration]


def _serving(members: Sequence[Member], configuration: str) -> list[Member]:
    return [member for member in members if member.configuration == configuration and member.serving]
