"""Settings as environment variables: a ``KEY=value`` file (``.run/db.env``, what
``scripts/mariadb.sh`` writes) read into a dict, and the variables a settings class reads.

``scripts/stack.py`` and ``ax3l-compare`` read the private MariaDB's file and hand each process
only the variables it reads; the test plugin reads the same file for its databases.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, BaseModel


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines; blank lines and ``#`` comments skipped, no quoting or expansion.

    Hand-written on purpose: python-dotenv's ``dotenv_values`` (already installed) reads the
    same file 15 times slower (``bench/bench_env_file.py``: 17 us against 268 us a read of a
    19-variable ``db.env``)."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def setting_names(model: type[BaseModel]) -> set[str]:
    """The environment variables a pydantic settings class reads (its validation aliases)."""
    names: set[str] = set()
    for info in model.model_fields.values():
        alias = info.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif isinstance(alias, AliasChoices):
            names.update(choice for choice in alias.choices if isinstance(choice, str))
    return names
