"""SnakeLab's configuration schema: loading, validation, defaults and the 26 flat columns.

The schema is SnakeLab's file and the only source of ranges: nothing here knows a bound.
JSON Schema alone is too lenient for Ax3l (``True`` would pass as 1 in Python, NaN compares
oddly), so ``validate`` adds the checks the contract needs and reports every problem as
``$.path: value rule``.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from ax3l.shared.schema_fast_path import Check, compile_schema

BUNDLED_SCHEMA = "snakelab-config.schema.json"


class ConfigInvalid(ValueError):
    """A configuration broke the schema; ``errors`` lists every problem, most specific first."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("; ".join(errors))


class SchemaFileError(RuntimeError):
    """The schema file is missing, unreadable or not a usable SnakeLab schema."""


@dataclass(frozen=True)
class Leaf:
    """One numeric setting of the configuration (a leaf of the schema)."""

    path: str  # dotted, e.g. "model.hidden_size"
    column: str  # SnakeLab's column, e.g. "model_hidden_size"
    type: str  # "integer" or "number"
    schema: dict[str, Any]

    @property
    def minimum(self) -> float | None:
        return self.schema.get("minimum")

    @property
    def maximum(self) -> float | None:
        return self.schema.get("maximum")

    @property
    def multiple_of(self) -> float | None:
        return self.schema.get("multipleOf")

    @property
    def const(self) -> Any:
        return self.schema.get("const")

    @property
    def default(self) -> Any:
        return self.schema.get("default")

    @property
    def title(self) -> str:
        return str(self.schema.get("title", self.path))

    @property
    def description(self) -> str:
        return str(self.schema.get("description", ""))

    @property
    def unit(self) -> str | None:
        return self.schema.get("x-snakelab-unit")

    def constraints(self) -> dict[str, Any]:
        """The leaf's constraints as data (what ``rules_text`` says in words): ``type``
        (``integer`` or ``number``), ``minimum``, ``maximum``, ``multiple_of``, ``const`` and
        ``unit``, each None when the schema sets none."""
        return {
            "type": self.type,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "multiple_of": self.multiple_of,
            "const": self.const,
            "unit": self.unit,
        }

    def rules_text(self) -> str:
        """The leaf's constraints in words, as shown to the LLM."""
        parts = [f"{'an integer' if self.type == 'integer' else 'a number'}"]
        if "const" in self.schema:
            parts.append(f"fixed at {self.const}")
        if self.minimum is not None and self.maximum is not None:
            parts.append(f"from {self.minimum} to {self.maximum} inclusive")
        elif self.minimum is not None:
            parts.append(f"at least {self.minimum}")
        elif self.maximum is not None:
            parts.append(f"at most {self.maximum}")
        if self.multiple_of is not None and not (self.type == "integer" and self.multiple_of == 1):
            parts.append(f"a multiple of {self.multiple_of}")
        if self.unit:
            parts.append(f"unit: {self.unit}")
        return ", ".join(parts)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_path(parts: list[Any] | tuple[Any, ...]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


class ConfigSchema:
    """A loaded SnakeLab configuration schema."""

    def __init__(self, document: dict[str, Any], source: str = "<memory>"):
        self.document = document
        self.source = source
        try:
            Draft202012Validator.check_schema(document)
        except jsonschema.SchemaError as exc:
            raise SchemaFileError(f"{source}: not a valid JSON Schema: {exc.message}") from exc
        self._validator = Draft202012Validator(document)
        self.leaves: tuple[Leaf, ...] = tuple(self._collect(document, []))
        if not self.leaves:
            raise SchemaFileError(f"{source}: the schema has no numeric settings")
        self.by_path = {leaf.path: leaf for leaf in self.leaves}
        self.by_column = {leaf.column: leaf for leaf in self.leaves}
        self.columns: tuple[str, ...] = tuple(leaf.column for leaf in self.leaves)

    @cached_property
    def _certainly_valid(self) -> Check | None:
        """Answers "certainly valid" in a fraction of jsonschema's time; None if it cannot.
        Compiled at the first validation (about 13 ms), not by processes that never validate."""
        return compile_schema(self.document)

    def _collect(self, node: dict[str, Any], prefix: list[str]) -> list[Leaf]:
        found: list[Leaf] = []
        for name, sub in node.get("properties", {}).items():
            path = [*prefix, name]
            kind = sub.get("type")
            if kind == "object":
                found.extend(self._collect(sub, path))
            elif kind in ("integer", "number"):
                found.append(Leaf(".".join(path), "_".join(path), kind, sub))
            else:
                raise SchemaFileError(
                    f"{self.source}: {'.'.join(path)} has type {kind!r}; only numbers are supported"
                )
        return found

    # -- defaults -------------------------------------------------------------------------

    def default_config(self) -> dict[str, Any]:
        """The complete configuration made of the schema's defaults."""
        return self.fill_defaults({})

    def fill_defaults(self, partial: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``partial`` with every missing leaf set to its default."""
        config = copy.deepcopy(partial)
        for leaf in self.leaves:
            node: Any = config
            parts = leaf.path.split(".")
            for part in parts[:-1]:
                if not isinstance(node, dict):
                    break
                node = node.setdefault(part, {})
            else:
                if isinstance(node, dict) and parts[-1] not in node and "default" in leaf.schema:
                    node[parts[-1]] = leaf.default
        return config

    # -- validation -----------------------------------------------------------------------

    def errors(self, config: Any) -> list[str]:
        """Every problem with ``config``, as ``$.path: value rule`` messages (empty if valid)."""
        problems = self._strict_type_errors(config, self.document, [])
        if problems:
            return problems
        if self._certainly_valid is not None and self._certainly_valid(config):
            return []
        found = sorted(
            self._validator.iter_errors(config),
            key=lambda e: (_json_path(list(e.absolute_path)), e.validator),
        )
        return [f"{_json_path(list(e.absolute_path))}: {e.message}" for e in found]

    def _strict_type_errors(self, value: Any, node: dict[str, Any], path: list[Any]) -> list[str]:
        # JSON Schema in Python lets True pass as 1 and has no word on NaN: catch both first.
        kind = node.get("type")
        where = _json_path(path)
        if kind in ("integer", "number"):
            if isinstance(value, bool) or not _is_number(value):
                return [f"{where}: {json.dumps(value, default=repr)} is not of type '{kind}'"]
            if isinstance(value, float) and not math.isfinite(value):
                return [f"{where}: {value} is not a finite number"]
            if kind == "integer" and isinstance(value, float) and not value.is_integer():
                return [f"{where}: {value} is not of type 'integer'"]
            return []
        if kind == "object" and isinstance(value, dict):
            problems: list[str] = []
            for name, sub in node.get("properties", {}).items():
                if name in value:
                    problems.extend(self._strict_type_errors(value[name], sub, [*path, name]))
            return problems
        return []

    def validate(self, config: Any) -> dict[str, Any]:
        """Return ``config`` with integers as ``int`` if it is valid, else raise ConfigInvalid."""
        problems = self.errors(config)
        if problems:
            raise ConfigInvalid(problems)
        return self.unflatten(self.flatten(config))

    # -- the 26 columns -------------------------------------------------------------------

    def flatten(self, config: dict[str, Any]) -> dict[str, int | float]:
        """The config as SnakeLab's flat columns (``model_hidden_size``...), in schema order."""
        flat: dict[str, int | float] = {}
        for leaf in self.leaves:
            flat[leaf.column] = self.coerce(leaf, self.get(config, leaf.path))
        return flat

    def unflatten(self, flat: dict[str, Any]) -> dict[str, Any]:
        """A nested config from flat columns; integers where the schema says integer."""
        config: dict[str, Any] = {}
        for leaf in self.leaves:
            parts = leaf.path.split(".")
            node = config
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = self.coerce(leaf, flat[leaf.column])
        return config

    @staticmethod
    def coerce(leaf: Leaf, value: Any) -> int | float:
        """The value as Python ``int`` for integer leaves and ``float`` for number leaves."""
        if isinstance(value, bool) or not _is_number(value):
            # Database drivers hand back Decimal for some column types.
            try:
                value = float(value)
            except (TypeError, ValueError) as exc:
                raise ConfigInvalid([f"$.{leaf.path}: {value!r} is not a number"]) from exc
        if leaf.type == "integer":
            if isinstance(value, float) and not value.is_integer():
                raise ConfigInvalid([f"$.{leaf.path}: {value} is not of type 'integer'"])
            return int(value)
        return float(value)

    def get(self, config: Mapping[str, Any], path: str) -> Any:
        """The value at the dotted ``path`` of ``config`` (``KeyError`` when it has none)."""
        node: Any = config
        for part in path.split("."):
            node = node[part]
        return node

    def with_values(self, config: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
        """A deep copy of ``config`` with the dotted paths in ``changes`` replaced."""
        result = copy.deepcopy(config)
        for path, value in changes.items():
            parts = path.split(".")
            node = result
            for part in parts[:-1]:
                node = node[part]
            node[parts[-1]] = value
        return result

    def changes(self, before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
        """``config_changes`` of two configs read in the schema's types: every setting they
        differ in, in schema order (``{"training.gamma": [0.96, 0.97]}``)."""
        return config_changes(
            self.unflatten(self.flatten(before)), self.unflatten(self.flatten(after))
        )


def dotted_paths(config: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a nested config by its dotted path (``model.hidden_size``): any shape, as
    a stored content is not trusted to fit a schema."""
    if not isinstance(config, dict):
        return {prefix: config} if prefix else {}
    flat: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(dotted_paths(value, path))
        else:
            flat[path] = value
    return flat


def config_changes(before: Any, after: Any) -> dict[str, list[Any]]:
    """``{path: [before's value, after's value]}`` for every dotted path whose value differs:
    ``after``'s paths in their order, then those only ``before`` has (None where one has none).
    The one configuration diff: the loop's comparison (``ConfigSchema.changes``) and the
    reports' golden pages."""
    old, new = dotted_paths(before or {}), dotted_paths(after or {})
    changed = {
        path: [old.get(path), value] for path, value in new.items() if old.get(path) != value
    }
    changed |= {path: [value, None] for path, value in old.items() if path not in new}
    return changed


def load_schema(path: str | Path | None = None) -> ConfigSchema:
    """Load the schema from ``path``, or the bundled copy of SnakeLab's file when None."""
    if path is None:
        text = resources.files("ax3l.shared.schema").joinpath(BUNDLED_SCHEMA).read_text("utf-8")
        return ConfigSchema(json.loads(text), source=f"bundled {BUNDLED_SCHEMA}")
    try:
        document = json.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise SchemaFileError(f"cannot read SnakeLab schema {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise SchemaFileError(f"SnakeLab schema {path} is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise SchemaFileError(f"SnakeLab schema {path} is not a JSON object")
    return ConfigSchema(document, source=str(path))


@lru_cache(maxsize=8)
def cached_schema(path: str | None = None) -> ConfigSchema:
    """``load_schema`` once per path per process."""
    return load_schema(path)
