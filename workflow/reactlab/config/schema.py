"""The config's JSON Schema: the file, the names registered in code, and validation.

Layer 2 of the config's validation (:mod:`reactlab.config`): the JSON Schema in
``workflow/schemas/config.schema.yaml`` checks types, ranges and unknown keys. It is also
the one source of the settings' defaults and bounds (:func:`schema_field`, used by
:mod:`reactlab.config.settings`). The names of providers, agents, benchmarks and tool
sources are the installed plugins' (:mod:`reactlab.core.plugins`): :func:`extended_schema`
fills the provider enums from them, and the cross-checks look each named entry up.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import Field

from reactlab.config.loading import FAST_LOADER, field_path
from reactlab.core.errors import ConfigError, UsageError
from reactlab.core.plugins import registry

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


@cache
def schema_file() -> dict[str, Any]:
    """The config schema as written (cached; :func:`extended_schema` fills its provider
    enums)."""
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        schema: dict[str, Any] = yaml.load(fh, Loader=FAST_LOADER)
    return schema


def schema_at(*path: str) -> Mapping[str, Any]:
    """The schema node at ``path`` (keys from the top: ``"$defs", "fault"``...)."""
    node: Any = schema_file()
    for key in path:
        node = node[key]
    found: Mapping[str, Any] = node
    return found


_BOUNDS = {"minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt",
           "exclusiveMaximum": "lt", "minLength": "min_length", "pattern": "pattern"}


def schema_field(section: tuple[str, ...], name: str, *, optional: bool = False) -> Any:
    """A pydantic Field with the default and bounds the schema gives ``name``: its
    ``default`` (None when ``optional`` and the schema has none, i.e. "left out"; required
    otherwise) and its minimum/maximum."""
    prop = schema_at(*section)[name]
    bounds = {arg: prop[key] for key, arg in _BOUNDS.items() if key in prop}
    if "default" in prop:
        return Field(default=prop["default"], **bounds)
    return Field(default=None, **bounds) if optional else Field(**bounds)


def _provider_enum(schema: Mapping[str, Any], http: bool) -> list[str]:
    enum: list[str] = schema["$defs"]["http_provider" if http else "inprocess_provider"]["enum"]
    return enum


def plugin_entry(kind: str, name: str, where: str, package: str | None = None) -> Any:
    """The installed plugin ``name`` of ``kind`` (:mod:`reactlab.core.plugins`): imported
    on first use; ConfigError at ``where`` naming the package to install (the entry's
    ``package``) and the nearest installed name when none is."""
    try:
        return registry(kind).lookup(name, package)
    except UsageError as exc:
        raise ConfigError(where, str(exc)) from None


def provider_entry(name: str, where: str = "provider", package: str | None = None) -> Any:
    """The installed provider ``name`` (:func:`plugin_entry`)."""
    return plugin_entry("provider", name, where, package)


def provider_has_http(name: str) -> bool:
    """Whether the installed provider ``name`` has an HTTP layer."""
    return bool(provider_entry(name).http)


def extended_schema() -> dict[str, Any]:
    """The config schema, its provider enums (those with an HTTP layer and those without)
    filled from the installed providers (:mod:`reactlab.core.plugins`) and any a test
    added to this process."""
    return _extended(tuple(registry("provider").names()))


@cache
def _extended(names: tuple[str, ...]) -> dict[str, Any]:
    schema = copy.deepcopy(schema_file())
    providers = registry("provider")
    for name in names:
        enum = _provider_enum(schema, providers.lookup(name).http)
        if name not in enum:
            enum.append(name)
    return schema


def _schema_error_message(err: Any) -> tuple[str, str]:
    """Turn a jsonschema error into (field path, message) a person can act on."""
    where = field_path(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = list(err.schema.get("properties", {}))
        extra = [k for k in err.instance if k not in allowed]
        if extra:
            key = extra[0]
            hint = difflib.get_close_matches(str(key), allowed, n=1)
            msg = "unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else "")
            msg += f"; allowed: {', '.join(allowed)}"
            return field_path([*err.absolute_path, key]), msg
    parts = list(err.absolute_path)
    if len(parts) == 2 and parts[0] == "scenarios" and err.validator in ("oneOf", "not"):
        return where, ("a scenario has exactly one of `steps` (and optionally "
                       "`repeat_last`), `extends` or `strategy`")
    if parts[:1] == ["scenarios"] and "steps" in parts and err.validator in (
            "minProperties", "maxProperties"):
        return where, "a step has exactly one of `calls` or `answer`"
    if len(parts) == 2 and parts[0] == "tasks" and err.validator == "not":
        return where, ("a task takes its tools from one of `mcp_server`, `mcp_servers` "
                       "or `tool_source`, or from the project's tools")
    if (err.validator == "not" and isinstance(err.instance, dict)
            and "raw_arguments" in err.instance):
        return where, "a call has `arguments` or `raw_arguments`, not both"
    return where, err.message


def validate_schema(raw: Mapping[str, Any]) -> None:
    """Check ``raw`` against the (extended) schema; ConfigError naming the first bad
    field."""
    # JSON Schema counts 6.0 as an integer; a step limit of 6.0 would then reach
    # range() as a float. Here an integer is a Python int (and never a bool).
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool))
    strict = jsonschema.validators.extend(jsonschema.Draft202012Validator,
                                          type_checker=checker)
    validator = strict(extended_schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: (list(map(str, e.absolute_path))))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        where, msg = _schema_error_message(best)
        raise ConfigError(where, msg)
