"""The newest lines of a window, whatever the log service's order: windows read backwards from the end, each twice as
long as the one before, until the limit is reached or the window's start. A busy deployment's last hour then costs a
few minutes of events, not the hour's (a log service pages its events oldest first)."""

from __future__ import annotations

import datetime
from collections.abc import Callable

from inferstack.day2.records import LogLine

FIRST_WINDOW = datetime.timedelta(minutes=5)
MAX_LIMIT = 10_000
"""The most lines `logs` prints: FilterLogEvents' largest page (CloudWatch Logs API Reference, read 2026-12-07)."""

ReadWindow = Callable[[datetime.datetime, datetime.datetime, int], list[LogLine]]
"""Reads the newest `keep` lines from `start` up to (not including) `end`, oldest first."""


def newest_lines(read: ReadWindow, since: datetime.datetime, until: datetime.datetime,
                 limit: int) -> tuple[list[LogLine], bool]:
    """The newest `limit` lines from `since` to `until`, oldest first, and whether the limit was reached (older lines
    of the window may then be left out)."""
    lines: list[LogLine] = []
    end, window = until, FIRST_WINDOW
    while end > since and len(lines) < limit:
        start = max(since, end - window)
        lines = read(start, end, limit - len(lines)) + lines
        end, window = start, window * 2
    return lines, len(lines) >= limit
