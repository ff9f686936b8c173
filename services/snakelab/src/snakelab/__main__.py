"""``python -m snakelab``: the same as ``snakelab-server``."""

import sys

from snakelab.server import main

sys.exit(main())
