"""Run one (task × backend × scenario) and write its trace."""

from __future__ import annotations

import platform
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.trace import SCHEMA_VERSION, TraceWriter

if TYPE_CHECKING:
    from reactlab.config import RunSpec
    from reactlab.loop import Executor

_VERSIONED = ("reactlab", "pydantic", "pandas", "tiktoken")
_PROVIDER_PACKAGES = {"openai": ("openai", "httpx"), "anthropic": ("anthropic", "httpx2"),
                      "local": ("transformers", "torch")}


@cache
def package_versions(provider: str) -> dict[str, str]:
    names = _VERSIONED + _PROVIDER_PACKAGES.get(provider, ())
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def header(spec: RunSpec) -> dict[str, Any]:
    return {"type": "header", "schema_version": SCHEMA_VERSION,
            "run": {"task": spec.task, "backend": spec.backend, "scenario": spec.scenario},
            "key": spec.key, "config_hash": spec.config_hash,
            "versions": package_versions(spec.backend_config["provider"]),
            "spec": spec.to_dict()}


def run_to_trace(spec: RunSpec, tools: Executor, out: str | Path) -> dict[str, Any]:
    """Run ``spec`` with ``tools`` and write the trace to ``out`` atomically.

    Returns the end record's data (termination, steps, answer, tokens, calls, errors).
    """
    from reactlab.backends import open_session
    from reactlab.loop import run_agent

    writer = TraceWriter(out)
    writer.add(header(spec))
    if spec.script.get("strategy") == "plan_execute":
        from reactlab.backends.local import load_model, run_plan_execute

        end = run_plan_execute(spec, load_model(spec), tools, writer.add)
    else:
        from reactlab.defences import NO_DEFENCES, question_tickers

        defences = spec.agent.get("defences", NO_DEFENCES)
        session = open_session(spec)
        end = run_agent(session, tools, spec.tools, spec.limits["max_steps"],
                        spec.limits["token_budget"], writer.add,
                        scope=question_tickers(spec.question) if defences["scope_rule"]
                        else None,
                        delimit=defences["delimit_tool_output"])
    writer.close(end)
    return end
