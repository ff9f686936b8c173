"""``python -m ax3l.compare``."""

import sys

from ax3l.compare.main import main

sys.exit(main())
