"""Services forked from the preloader: their own environment, argv, log and session; stopped by
process group; a service that exits is seen as exited."""

from __future__ import annotations

import json
import os
import sys
from contextlib import closing

from ax3l.compare.preload import Preloader
from ax3l.shared.waiting import wait_until

SERVICE = """
import json, os, sys, time
print(json.dumps({"env": dict(os.environ), "argv": sys.argv[1:], "sid": os.getsid(0),
                  "pid": os.getpid()}), flush=True)
if "--exit" in sys.argv:
    sys.exit(3)
time.sleep(60)
"""


def test_a_forked_service_runs_with_only_its_request_and_stops_with_its_group(tmp_path):
    """The child sees exactly the request's environment and arguments (nothing of the
    preloader's), leads a session of its own, writes to its log; stop() ends it; a service that
    exits reads as exited."""
    (tmp_path / "envdump.py").write_text(SERVICE)
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "PRELOADER_ONLY": "x"}
    with closing(Preloader(base)) as spawner:
        log = tmp_path / "logs" / "service.log"
        service = spawner.launch(
            "envdump", [sys.executable, "-m", "envdump", "--flag"], {"ONLY_MINE": "1"}, log
        )
        wait_until(lambda: log.exists() and log.read_text().strip(), 30, "the service's output")
        seen = json.loads(log.read_text().splitlines()[0])
        assert seen["env"] == {"ONLY_MINE": "1"}
        assert seen["argv"] == ["--flag"]
        assert seen["sid"] == seen["pid"] == service.pid
        assert service.alive() and service.exited() is None
        service.stop(5)
        assert not service.alive()

        quitting = spawner.launch(
            "quitter", [sys.executable, "-m", "envdump", "--exit"], {}, tmp_path / "q.log"
        )
        wait_until(lambda: quitting.exited() is not None, 30, "the service to exit")
        assert "quitter exited" in str(quitting.failure("exited"))
