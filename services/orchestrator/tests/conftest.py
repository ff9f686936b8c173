"""Fixtures for the orchestrator's end-to-end tests: ``stack`` (a whole stack as processes,
not yet started) comes from the test plugin, its helpers from ``ax3l.testing.stack`` so the
benchmark can use them too, and this suite's own from ``orchestrator_stack``."""
