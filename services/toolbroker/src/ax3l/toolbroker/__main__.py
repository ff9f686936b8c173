"""``python -m ax3l.toolbroker`` runs ``ax3l-toolbroker``."""

import sys

from ax3l.toolbroker.main import main

sys.exit(main())
