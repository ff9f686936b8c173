"""A child process with its output in a log file: ``ax3l.shared.processes``, re-exported
where the suites have always imported it (every process the tests start is one)."""

from ax3l.shared.processes import ManagedProcess as ManagedProcess
from ax3l.shared.processes import ProcessFailed as ProcessFailed
from ax3l.shared.processes import http_ok as http_ok
