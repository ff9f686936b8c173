"""The stack, defined once: ``spec`` (each service's command, settings, port and readiness),
``supervisor`` (the restart policy, with hooks for a chaos driver's kills and freezes) and
``mariadb`` (a private MariaDB of ``scripts/mariadb.sh``). ``make run`` (``scripts/stack.py``),
the tests' stack, the chaos tier and ``ax3l-compare``'s repeats all build from them.
"""
