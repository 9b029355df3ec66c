"""The generic types of an outside suite: a shard of cases, their paths, a played policy.

A suite case is a :class:`~reactlab.config.RunSpec` like any run, with its ``suite`` part
(:class:`~reactlab.config.settings.SuiteCase`): one case on one backend under one
scenario (its ``to_dict`` is the trace header's spec). :class:`Shard` holds the cases of
one (suite, backend, scenario) that one job runs; :func:`played` writes a scripted
policy's steps into a case's spec when it runs. :func:`case_paths` and the helpers after
it place a case's trace and verification; :func:`sample_cases` is the seeded sample every
benchmark takes of its cases. Every benchmark (:mod:`reactlab.suites.registry`) builds
these, and nothing here knows a benchmark.

The sample is a pure function of the seed and the case ids: the cases of a category are
ordered by ``sha256(f"{seed}:{case id}")`` and the first ``sample`` taken, so adding a
category or growing the sample keeps the cases already chosen.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reactlab.analysis.verify import REPAIR
from reactlab.config import RunSpec
from reactlab.config.settings import PolicyScript, script_settings
from reactlab.core.errors import TraceError, UsageError

if TYPE_CHECKING:
    from reactlab.trace import Trace

__all__ = ["SCENARIO_MODEL", "Shard", "case_paths", "checked_record", "digest_shards",
           "played", "recording_path", "sample_cases", "shard_paths", "spec_traces",
           "verified_path"]

#: The scenario of a model backend's case (a scripted backend's is its policy's name).
SCENARIO_MODEL = "react"


def _natural(case_id: str) -> tuple[str, int]:
    m = re.fullmatch(r"(.*?)_?(\d+)", case_id)
    return (m.group(1), int(m.group(2))) if m else (case_id, -1)


def played(spec: RunSpec, steps: Callable[[RunSpec], list[dict[str, Any]]]) -> RunSpec:
    """``spec`` as its run plays it: a scripted policy (:class:`PolicyScript`) replaced by
    the steps its benchmark writes for the case (``steps(spec)``: steps as a scenario of
    config.yaml has them, strings being templates: a benchmark writes its data's text
    through :func:`reactlab.config.scripts.literal`); any other spec as it is. The run's
    trace header holds the played spec, so a trace shows the steps its policy took."""
    if not isinstance(spec.script, PolicyScript):
        return spec
    script = script_settings({"model": spec.script.model, "steps": steps(spec),
                              "repeat_last": False, "strategy": spec.script.strategy},
                             f"{spec.key}: script")
    return replace(spec, script=script)


@dataclass(frozen=True)
class Shard:
    """Cases of one (suite, backend, scenario), run by one job."""

    suite: str
    backend: str
    scenario: str
    index: int
    specs: tuple[RunSpec, ...]

    @property
    def id(self) -> str:
        return f"{self.suite}__{self.backend}__{self.scenario}__{self.index:04d}"

    @property
    def model(self) -> bool:
        return self.specs[0].backend_config.mode == "model"

    @property
    def live(self) -> bool:
        """A live API's shard: its cases' exchanges are recorded, or replayed."""
        return self.specs[0].backend_config.mode == "live"

    @property
    def provider(self) -> str:
        return self.specs[0].backend_config.provider

    def to_json(self) -> str:
        return json.dumps([s.to_dict() for s in self.specs], sort_keys=True,
                          ensure_ascii=False, separators=(",", ":"))

    @cached_property
    def digest(self) -> str:
        """A digest of the shard's specs (the run job's parameter: a new value reruns the
        shard). It changes exactly when :meth:`to_json` does, but each shared part of a
        spec (a case's suite data, the backend, agent and limit settings) is hashed once
        per call of :func:`reactlab.suites.plan.plan`, not once per spec (see :func:`_digest`)."""
        return _digest(self.specs, {})

    def traces(self, root: str = "results/suites") -> list[str]:
        return [shard_paths(s, root)[0] for s in self.specs]

    def verified(self, root: str = "results/suites") -> list[str]:
        return [shard_paths(s, root)[1] for s in self.specs]


def _part(obj: Any, memo: dict[int, tuple[Any, str]]) -> str:
    """sha256 of one shared part of a spec's JSON, memoised by identity (``memo`` keeps
    the object alive with its digest, so an id is never reused within one memo)."""
    hit = memo.get(id(obj))
    if hit is None:
        value = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        hit = memo[id(obj)] = (obj, hashlib.sha256(text.encode()).hexdigest())
    return hit[1]


def _digest(specs: Sequence[RunSpec], memo: dict[int, tuple[Any, str]]) -> str:
    """The digest of a shard's specs: the canonical JSON of each spec, with its shared
    parts (``suite``, ``backend_config``, ``limits``, ``agent``) replaced by their own
    sha256 (:func:`_part`)."""
    rows = [{"task": s.task, "backend": s.backend, "scenario": s.scenario,
             "question": s.question, "tools": list(s.tools), "params": dict(s.params),
             "script": s.script.to_dict(), "backend_config": _part(s.backend_config, memo),
             "limits": _part(s.limits, memo), "agent": _part(s.agent, memo),
             "suite": _part(s.suite, memo)} for s in specs]
    text = json.dumps(rows, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def case_paths(suite: str, backend: str, scenario: str, task: str,
               root: str = "results/suites") -> tuple[str, str]:
    """(trace, verification) paths of one case of ``suite``."""
    rel = f"{backend}/{scenario}/{task}"
    return f"{root}/{suite}/traces/{rel}.jsonl", f"{root}/{suite}/verified/{rel}.json"


def shard_paths(spec: RunSpec, root: str = "results/suites") -> tuple[str, str]:
    """(trace, verification) paths of one case."""
    assert spec.suite is not None, f"{spec.key} is no suite case"
    return case_paths(spec.suite.name, spec.backend, spec.scenario, spec.task, root)


def recording_path(trace_path: str) -> str:
    """The recording of a live case's HTTP exchanges, beside its trace path
    (:func:`case_paths`): ``{suite}/recordings/{backend}/{scenario}/{task}.jsonl``."""
    head, sep, rel = trace_path.rpartition("/traces/")
    if not sep or not rel.endswith(".jsonl"):
        raise UsageError(f"{trace_path}: not a suite trace path")
    return f"{head}/recordings/{rel}"


def verified_path(trace_path: str) -> str:
    """The verification path beside a case's trace path (:func:`case_paths`)."""
    head, sep, rel = trace_path.rpartition("/traces/")
    if not sep or not rel.endswith(".jsonl"):
        raise UsageError(f"{trace_path}: not a suite trace path")
    return f"{head}/verified/{rel[:-len('.jsonl')]}.json"


def spec_traces(specs_json: str, root: str = "results/suites") -> list[str]:
    """The trace paths of a shard's spec file (:meth:`Shard.to_json`), in its order."""
    return [case_paths(d["suite"]["name"], d["backend"], d["scenario"], d["task"], root)[0]
            for d in json.loads(specs_json)]


def sample_cases(cases: tuple[Any, ...], sample: int | None, seed: int) -> list[Any]:
    """The seeded sample of ``cases`` (all when ``sample`` is None), in natural id order."""
    if sample is not None and sample < len(cases):
        ranked = sorted(cases, key=lambda c: hashlib.sha256(f"{seed}:{c.id}".encode())
                        .hexdigest())
        cases = tuple(ranked[:sample])
    return sorted(cases, key=lambda c: _natural(c.id))


def digest_shards(shards: Sequence[Shard]) -> None:
    """Compute every shard's :attr:`Shard.digest`, each shared part of the specs hashed
    once for all of them (what a plan does once it has cut its shards)."""
    memo: dict[int, tuple[Any, str]] = {}
    for shard in shards:
        shard.__dict__["digest"] = _digest(shard.specs, memo)


def checked_record(tr: Trace, verified: str | Path, trace_path: str,
                   record: Callable[[Trace, str], dict[str, Any]]) -> dict[str, Any]:
    """The verification record of ``tr`` recomputed by ``record`` (its benchmark's
    scorer), after checking that the stored file ``verified`` agrees with it."""
    try:
        stored = json.loads(Path(verified).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TraceError(f"{verified}: cannot read the verification ({exc}); "
                         f"{REPAIR}") from exc
    fresh = record(tr, trace_path)
    if stored != fresh:
        raise TraceError(f"{verified}: differs from verifying {trace_path} again "
                         f"(another version of the trace, or edited); {REPAIR}")
    return fresh
