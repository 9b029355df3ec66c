"""Cross-checks of the ``suites:`` section (the schema checks its shape).

Each suite's benchmark must be installed: a plugin of the group ``reactlab.benchmarks``
(:mod:`reactlab.core.plugins`; the built-in BFCL and AgentDojo are reactlab's own entry
points), else the error names the entry's ``package:``. Its categories and policies must
be that benchmark's own, its fields ones that benchmark takes, and its backends must
exist. Any backend runs a suite: one that plays scripts (``scripted``, ``simulated``)
plays each of the suite's policies, one that runs a model (``model``, ``live``) runs each
case once. The cases themselves are read from the benchmark by
:mod:`reactlab.suites.plan`, not here; only the benchmarks the config names are imported.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from reactlab.config.schema import plugin_entry, schema_at
from reactlab.core.errors import ConfigError

__all__ = ["RUNS_MODEL", "check_suites"]

#: The modes whose backend runs a model (a local one, a live API): a suite's case runs
#: once on it (scenario ``react``); a backend in another mode (``scripted``, ``simulated``)
#: plays each of the suite's scripted policies.
RUNS_MODEL = ("model", "live")
#: The fields of a suite entry that every benchmark takes; the schema's others are each
#: some benchmark's own (its entry's ``only``).
COMMON = ("benchmark", "package", "backends", "categories", "policies", "sample", "seed",
          "shard_size", "system_prompt", "settings")


def check_suites(raw: Mapping[str, Any]) -> None:
    """Raise ConfigError naming the field of the first suite entry that cannot run."""
    for name, suite in (raw.get("suites") or {}).items():
        bench = plugin_entry("benchmark", suite["benchmark"], f"suites.{name}.benchmark",
                             suite.get("package"))
        for key in ("categories", "policies"):
            own = getattr(bench, key)
            for j, value in enumerate(suite.get(key, ())):
                if value not in own:
                    raise ConfigError(f"suites.{name}.{key}[{j}]",
                                      f"{value!r} is not one of {suite['benchmark']}'s "
                                      f"{key} ({', '.join(own)})")
        _check_settings(name, suite, bench)
        for key in suite:
            if key not in COMMON and key not in bench.only and key in _schema_fields():
                raise ConfigError(f"suites.{name}.{key}",
                                  f"a {suite['benchmark']} suite takes no {key!r} (its own "
                                  f"fields: {', '.join(bench.only) or 'none'})")
        for j, backend in enumerate(suite["backends"]):
            where = f"suites.{name}.backends[{j}]"
            cfg = raw["backends"].get(backend)
            if cfg is None:
                hint = difflib.get_close_matches(backend, list(raw["backends"]), n=1)
                raise ConfigError(where, f"no backend named {backend!r}"
                                  + (f" (did you mean {hint[0]!r}?)" if hint else ""))
            # any backend runs a suite: see the module docstring


def _schema_fields() -> set[str]:
    return set(schema_at("properties", "suites", "additionalProperties", "properties"))


def _check_settings(name: str, suite: Mapping[str, Any], bench: Any) -> None:
    """The suite's ``settings`` checked by its benchmark's own model (a ConfigError
    naming the field; a benchmark without one takes none)."""
    given = suite.get("settings")
    if given is None:
        return
    model = getattr(bench, "settings", None)
    if model is None:
        raise ConfigError(f"suites.{name}.settings",
                          f"benchmark {suite['benchmark']!r} takes no settings")
    try:
        model.model_validate(given)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = str(err["loc"][0]) if err["loc"] else "?"
        raise ConfigError(f"suites.{name}.settings.{where}", err["msg"]) from None
