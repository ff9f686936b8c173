"""The toolbroker's REST routes."""
