"""``python -m ax3l.app.snakelab.tools``: the SnakeLab MCP stdio server."""

import sys

from ax3l.app.snakelab.tools.server import main

sys.exit(main())
