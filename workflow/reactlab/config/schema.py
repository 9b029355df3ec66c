"""The config's JSON Schema: the file, the names registered in code, and validation.

Layer 2 of the config's validation (:mod:`reactlab.config`): the JSON Schema in
``workflow/schemas/config.schema.yaml`` checks types, ranges and unknown keys. It is also
the one source of the settings' defaults and bounds (:func:`schema_field`, used by
:mod:`reactlab.config.settings`). Providers, benchmarks and frameworks registered in code
(:func:`declare_provider`, :func:`declare_benchmark`, :func:`declare_framework`) are
accepted from then on: :func:`extended_schema` adds them to the schema's enums.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import Field

from reactlab.config.agents import FRAMEWORKS, LESSON
from reactlab.config.loading import FAST_LOADER, field_path
from reactlab.config.suites import BENCHMARKS
from reactlab.core.errors import ConfigError

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


@cache
def schema_file() -> dict[str, Any]:
    """The config schema as written (cached; :func:`extended_schema` extends its enums
    with the registered providers and benchmarks)."""
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


#: Providers registered in code beyond the schema's built-in ones: name → HTTP layer.
_DECLARED: dict[str, bool] = {}


def declare_provider(name: str, *, http: bool) -> None:
    """Accept ``name`` as a backend's ``provider`` (with the modes and options of a
    provider with an HTTP layer, or of one without). Called by
    :func:`reactlab.backends.registry.register`; the built-in names are the schema's."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError("provider", f"a provider name is lower-case letters, digits and "
                                      f"underscores, not {name!r}")
    _DECLARED[name] = http
    extended_schema.cache_clear()


def declare_benchmark(name: str, *, categories: Sequence[str], policies: Sequence[str],
                      only: Sequence[str] = ()) -> None:
    """Accept ``name`` as a suite entry's ``benchmark``, with its own ``categories`` and
    ``policies``, and the entry fields ``only`` it takes (checked by
    :func:`reactlab.config.suites.check_suites`). Called by
    :func:`reactlab.suites.registry.register`; the built-in names are the schema's."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError("benchmark", f"a benchmark name is lower-case letters, digits and "
                                       f"underscores, not {name!r}")
    BENCHMARKS[name] = {"categories": tuple(categories), "policies": tuple(policies),
                        "only": tuple(only)}
    extended_schema.cache_clear()


def declare_framework(name: str, *, providers: Sequence[str],
                      settings: Sequence[str] = (), mcp: bool = False) -> None:
    """Accept ``name`` as an agent's ``framework``, with the providers (wire APIs) its
    client speaks, the ``settings`` it takes and whether it takes MCP tools (checked by
    :func:`reactlab.config.agents.check_agents`). Called by
    :func:`reactlab.frameworks.registry.register`."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name == LESSON:
        raise ConfigError("framework", f"a framework name is lower-case letters, digits and "
                                       f"underscores, and not {LESSON!r}: {name!r}")
    FRAMEWORKS[name] = {"providers": tuple(providers), "settings": tuple(settings),
                        "mcp": ("stdio",) if mcp else ()}


def _provider_enum(schema: Mapping[str, Any], http: bool) -> list[str]:
    enum: list[str] = schema["$defs"]["http_provider" if http else "inprocess_provider"]["enum"]
    return enum


def provider_has_http(name: str) -> bool:
    """Whether the provider ``name`` (built in or declared) has an HTTP layer."""
    if name in _DECLARED:
        return _DECLARED[name]
    return name in _provider_enum(extended_schema(), True)


@cache
def extended_schema() -> dict[str, Any]:
    """The config schema, its provider enums extended by the declared providers, its
    suites' benchmark, category and policy enums by the declared benchmarks."""
    schema = copy.deepcopy(schema_file())
    backend = schema["properties"]["backends"]["additionalProperties"]["properties"]
    for name, http in _DECLARED.items():
        if name not in backend["provider"]["enum"]:
            backend["provider"]["enum"].append(name)
            _provider_enum(schema, http).append(name)
    entry = schema["properties"]["suites"]["additionalProperties"]["properties"]
    for name, spec in BENCHMARKS.items():  # the declared ones beyond the schema's enums
        for enum, values in ((entry["benchmark"]["enum"], (name,)),
                             (entry["categories"]["items"]["enum"], spec["categories"]),
                             (entry["policies"]["items"]["enum"], spec["policies"])):
            enum += [v for v in values if v not in enum]
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
