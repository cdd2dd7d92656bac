"""Every test plans on one fixed date, so price ages (stale after a year) do not move with the calendar.

The variable is inherited by the CLI subprocesses the tests start; a test that needs another date sets it itself.
"""

import os

TEST_RUN_DATE = "2026-12-01"
os.environ["INFERSTACK_TODAY"] = TEST_RUN_DATE
