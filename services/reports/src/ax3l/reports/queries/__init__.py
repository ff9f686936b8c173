"""Read-only queries over Ax3l's events and SnakeLab's tables, one module per resource."""
