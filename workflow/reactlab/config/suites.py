"""Cross-checks of the ``suites:`` section (the schema checks its shape).

Each suite's categories and policies must be its benchmark's own, its fields ones that
benchmark takes, and its backends must exist. Any backend runs a suite: one that plays
scripts (``scripted``, ``simulated``) plays each of the suite's policies, one that runs a
model (``model``, ``live``) runs each case once. The cases themselves are read
from the installed benchmark by :mod:`reactlab.suites.plan`, not here: this module stays
cheap and imports no benchmark package. The benchmarks it knows are the built-in ones
(:data:`BUILTIN`, the schema's enums) and those declared by
:func:`reactlab.config.declare_benchmark`, which the suites' registry calls for each
benchmark it registers (:mod:`reactlab.suites.registry`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from reactlab.core.errors import ConfigError

__all__ = ["BENCHMARKS", "BUILTIN", "RUNS_MODEL", "check_suites"]

#: Each benchmark's own categories and scripted policies (the schema's enums are the
#: built-in ones' union), and the entry fields only that benchmark takes. The built-in
#: ones are kept here as plain names so that the check imports no benchmark package
#: (tests/test_agentdojo.py checks they match the registry's entries);
#: :func:`reactlab.config.declare_benchmark` adds a registered one.
BUILTIN: dict[str, dict[str, tuple[str, ...]]] = {
    "bfcl": {"categories": ("simple_python", "multiple", "parallel", "parallel_multiple",
                            "irrelevance"),
             "policies": ("oracle", "wrong_type", "wrong_name", "missing_argument"),
             "only": ("batch_size",)},
    "agentdojo": {"categories": ("workspace", "travel", "banking", "slack"),
                  "policies": ("ground_truth", "obeys_injection"),
                  "only": ("defences", "max_steps")},
}
#: The modes whose backend runs a model (a local one, a live API): a suite's case runs
#: once on it (scenario ``react``); a backend in another mode (``scripted``, ``simulated``)
#: plays each of the suite's scripted policies.
RUNS_MODEL = ("model", "live")
#: The benchmarks the check accepts: the built-in ones and the declared ones.
BENCHMARKS: dict[str, dict[str, tuple[str, ...]]] = dict(BUILTIN)


def check_suites(raw: Mapping[str, Any]) -> None:
    """Raise ConfigError naming the field of the first suite entry that cannot run."""
    for name, suite in (raw.get("suites") or {}).items():
        bench = BENCHMARKS.get(suite["benchmark"])
        if bench is None:  # the schema accepted it, but nothing declared it here
            raise ConfigError(f"suites.{name}.benchmark",
                              f"{suite['benchmark']!r} is not a registered benchmark "
                              f"({', '.join(BENCHMARKS)})")
        for key in ("categories", "policies"):
            for j, value in enumerate(suite.get(key, ())):
                if value not in bench[key]:
                    raise ConfigError(f"suites.{name}.{key}[{j}]",
                                      f"{value!r} is not one of {suite['benchmark']}'s "
                                      f"{key} ({', '.join(bench[key])})")
        for other, spec in BENCHMARKS.items():
            for key in spec["only"]:
                if key in suite and other != suite["benchmark"]:
                    raise ConfigError(f"suites.{name}.{key}",
                                      f"only a {other} suite takes {key!r}, this one is "
                                      f"{suite['benchmark']}")
        for j, backend in enumerate(suite["backends"]):
            where = f"suites.{name}.backends[{j}]"
            cfg = raw["backends"].get(backend)
            if cfg is None:
                hint = difflib.get_close_matches(backend, list(raw["backends"]), n=1)
                raise ConfigError(where, f"no backend named {backend!r}"
                                  + (f" (did you mean {hint[0]!r}?)" if hint else ""))
            # any backend runs a suite: see the module docstring
