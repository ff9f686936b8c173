"""``python -m ax3l.orchestrator``."""

import sys

from ax3l.orchestrator.main import main

sys.exit(main())
