"""Waiting on a condition with a deadline: ``ax3l.shared.waiting``, re-exported where the
suites have always imported it (the one way tests wait, never a fixed sleep)."""

from ax3l.shared.waiting import WaitTimeout as WaitTimeout
from ax3l.shared.waiting import wait_until as wait_until
from ax3l.shared.waiting import wait_until_async as wait_until_async
