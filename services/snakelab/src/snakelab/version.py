"""The version this reference SnakeLab reports in ``health`` and stores with every run."""

from __future__ import annotations

# A 2.x version speaks the 2.x contract; "-ref" tells its rows apart from the real server's.
PROJECT_VERSION = "2.0.0-ref"
SERVICE_NAME = "snake-lab"
