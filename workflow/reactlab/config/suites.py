"""Cross-checks of the ``suites:`` section (the schema checks its shape).

Each suite's backends must exist and run in-process: a scripted ``local`` backend (it
plays the suite's policies) or a ``local`` model backend. The cases themselves are read
from the installed benchmark by :mod:`reactlab.suites.plan`, not here: this module stays
cheap and imports no benchmark package.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from reactlab.core.errors import ConfigError

__all__ = ["check_suites"]


def check_suites(raw: Mapping[str, Any]) -> None:
    """Raise ConfigError naming the field of the first suite entry that cannot run."""
    for name, suite in (raw.get("suites") or {}).items():
        for j, backend in enumerate(suite["backends"]):
            where = f"suites.{name}.backends[{j}]"
            cfg = raw["backends"].get(backend)
            if cfg is None:
                hint = difflib.get_close_matches(backend, list(raw["backends"]), n=1)
                raise ConfigError(where, f"no backend named {backend!r}"
                                  + (f" (did you mean {hint[0]!r}?)" if hint else ""))
            if cfg["provider"] != "local" or cfg["mode"] not in ("scripted", "model"):
                raise ConfigError(where, f"backend {backend!r} is {cfg['provider']} in mode "
                                  f"{cfg['mode']}; a suite runs on a local backend, scripted "
                                  "(it plays the suite's policies) or a model")
