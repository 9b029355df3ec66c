"""The Berkeley Function Calling Leaderboard (``bfcl-eval``) as a suite.

* Data: the package's own files, ``bfcl_eval/data/BFCL_v4_<category>.json`` (one JSON case
  per line: ``id``, ``question`` — a list of conversations, ``function`` — the function
  documents) and ``data/possible_answer/BFCL_v4_<category>.json`` (``ground_truth``: per
  expected call, ``{name: {param: [acceptable values]}}``; ``""`` among the values marks
  an optional parameter that may be left out).
* Tools: each function document becomes a tool whose parameters are JSON Schema, the
  types mapped with the package's own ``constants.type_mappings.GORILLA_TO_OPENAPI``
  (``dict`` → ``object``, ``float`` → ``number``, ``tuple`` → ``array``, ``any`` →
  ``string``, …), recursively through ``properties`` and ``items``. Names (``math.hypot``)
  and descriptions (English) are kept as the benchmark wrote them.
* Scoring: BFCL's own AST checker,
  ``bfcl_eval.eval_checker.ast_eval.ast_checker.ast_checker``, imported as a library. Its
  module imports ``constants.model_config`` (every provider handler, and so every provider
  SDK) only to ask ``MODEL_CONFIG_MAPPING[model].underscore_to_dot``; a stand-in module
  that answers False for :data:`MODEL_NAME` is registered first (calls keep their dots,
  as the Hermes format allows: BFCL's "prompt" mode, the local backend), and True for
  :data:`MODEL_NAME_FC` (BFCL's "FC" mode, an HTTP API's native function calling: the
  tools go with dots made underscores, :func:`api_name`). ``eval_runner`` is never
  imported (it creates result folders at import); its wrapping of the checker is
  reproduced in :func:`score`:
  a turn whose calls do not decode is ``ast_decoder:decoder_failed``; an irrelevance case
  is correct when the turn has no decodable call (``irrelevance_error:decoder_success``
  otherwise).
* Policies (:func:`policy_calls`): scripted answers that validate the harness against the
  checker — ``oracle`` writes a possible answer (the first acceptable value of every
  parameter that must or may be given), and three faulty ones each change the oracle's
  answer in one way that BFCL names: ``wrong_type`` (one argument of the wrong JSON type:
  ``type_error:simple``), ``wrong_name`` (a function name not offered:
  ``simple_function_checker:wrong_func_name``), ``missing_argument`` (a required argument
  left out: ``simple_function_checker:missing_required``). In the parallel categories
  BFCL reports any such fault as ``parallel_function_checker_no_order:cannot_find_match``
  and the specific type as a sub-error (:func:`score` keeps both). On an irrelevance
  case the oracle answers in text and every faulty policy calls the first function.
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import json
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from reactlab.core.errors import SuiteUnavailable, UsageError

__all__ = [
    "CATEGORIES",
    "EXPECTED_ERROR",
    "MODEL_NAME",
    "MODEL_NAME_FC",
    "MODES",
    "POLICIES",
    "Case",
    "api_name",
    "data_dir",
    "load_cases",
    "oracle_calls",
    "policy_calls",
    "score",
    "to_json_schema",
    "tool_definitions",
]

DISTRIBUTION = "bfcl-eval"
VERSION = "2026.3.23"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}=={VERSION}"

#: The single-turn Python categories this suite runs, in BFCL's order.
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
#: BFCL's "non-live AST" summary is the unweighted mean of these four accuracies.
NON_LIVE_AST = ("simple_python", "multiple", "parallel", "parallel_multiple")

POLICIES = ("oracle", "wrong_type", "wrong_name", "missing_argument")

#: The error type BFCL must give each faulty policy outside the parallel categories
#: (there it is the sub-error of ``cannot_find_match``).
EXPECTED_ERROR = {
    "wrong_type": "type_error:simple",
    "wrong_name": "simple_function_checker:wrong_func_name",
    "missing_argument": "simple_function_checker:missing_required",
}

#: The model name the checker is given for a turn in BFCL's "prompt" mode (the local
#: backend: the tools in the system prompt, calls as Hermes text): its stand-in config
#: says keep dots in names.
MODEL_NAME = "reactlab"
#: ... and in BFCL's "FC" mode (an HTTP API's native function calling): the APIs refuse
#: dots in tool names (OpenAI: ``a-z A-Z 0-9 _ -``), so the tools go with each dot made
#: an underscore (:func:`api_name`, as BFCL's own FC handlers send them) and the checker is
#: told ``underscore_to_dot``: it compares the function documents' names the same way.
MODEL_NAME_FC = "reactlab-fc"
#: The two ways a model reads the tools and writes its calls (BFCL's own names).
MODES = ("prompt", "fc")
_STANDIN = "bfcl_eval.constants.model_config"


@dataclass(frozen=True)
class Case:
    """One BFCL case: its id, category, the user's question, the function documents as
    BFCL wrote them, and the possible answer (None for irrelevance)."""

    id: str
    category: str
    question: str
    functions: tuple[dict[str, Any], ...]
    possible_answer: tuple[dict[str, Any], ...] | None


def data_dir() -> Path:
    """``bfcl_eval/data`` of the installed package (found without importing it)."""
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise SuiteUnavailable(f"the BFCL suite needs the package {DISTRIBUTION!r}: "
                               f"{INSTALL_HINT} (or `make env`)") from None
    if version != VERSION:
        raise SuiteUnavailable(f"{DISTRIBUTION} {version} is installed; this suite reads "
                               f"{VERSION}: {INSTALL_HINT}")
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        raise SuiteUnavailable(f"{DISTRIBUTION} is installed but bfcl_eval cannot be found")
    return Path(spec.origin).parent / "data"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@cache
def load_cases(category: str) -> tuple[Case, ...]:
    """Every case of ``category``, in the file's order."""
    if category not in CATEGORIES:
        raise UsageError(f"unknown BFCL category {category!r} (known: {', '.join(CATEGORIES)})")
    root = data_dir()
    answers: dict[str, Any] = {}
    if category != "irrelevance":
        answers = {a["id"]: a["ground_truth"]
                   for a in _jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")}
    out = []
    for entry in _jsonl(root / f"BFCL_v4_{category}.json"):
        turns = entry["question"]
        if len(turns) != 1 or [m["role"] for m in turns[0]] != ["user"]:
            raise UsageError(f"{entry['id']}: not a single-turn, single-message case")
        truth = answers.get(entry["id"])
        if category != "irrelevance" and truth is None:
            raise UsageError(f"{entry['id']}: no possible answer in the package")
        out.append(Case(id=entry["id"], category=category, question=turns[0][0]["content"],
                        functions=tuple(entry["function"]),
                        possible_answer=None if truth is None else tuple(truth)))
    return tuple(out)


# ------------------------------------------------------------------------------ tools


def _mapping() -> Mapping[str, str]:
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI  # lazy: optional (bfcl)

    mapping: Mapping[str, str] = GORILLA_TO_OPENAPI
    return mapping


def to_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL parameter document as JSON Schema: every ``type`` mapped with
    ``GORILLA_TO_OPENAPI`` (unknown or missing types become ``string``, as BFCL's own
    conversion does), recursively through ``properties`` and ``items``; BFCL's own
    ``optional`` flag (not a JSON Schema keyword) is dropped."""
    mapping = _mapping()
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            out[key] = mapping.get(str(value), "string")
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key == "items" and isinstance(value, Mapping):
            out[key] = to_json_schema(value)
        elif key == "optional":
            continue
        else:
            out[key] = copy.deepcopy(value)
    if "type" not in out:
        out["type"] = "string"
    return out


def api_name(name: str) -> str:
    """A function's name as a tool of an HTTP API (BFCL's FC handlers:
    ``re.sub(r"\\.", "_", name)``)."""
    return name.replace(".", "_")


def tool_definitions(functions: Sequence[Mapping[str, Any]],
                     mode: str = "prompt") -> list[dict[str, Any]]:
    """``{"name", "description", "parameters"}`` per function document, in order; in
    ``fc`` mode each name as :func:`api_name` writes it."""
    rename = api_name if mode == "fc" else str
    return [{"name": rename(f["name"]), "description": f.get("description", ""),
             "parameters": to_json_schema(f["parameters"])} for f in functions]


# ---------------------------------------------------------------------------- checker


@cache
def _ast_checker() -> Any:
    """BFCL's ``ast_checker`` with the stand-in for ``constants.model_config``."""
    if _STANDIN not in sys.modules:
        standin = types.ModuleType(_STANDIN)
        standin.__doc__ = ("reactlab's stand-in: the AST checker only reads "
                           "MODEL_CONFIG_MAPPING[model].underscore_to_dot")
        standin.__dict__["MODEL_CONFIG_MAPPING"] = {
            MODEL_NAME: types.SimpleNamespace(underscore_to_dot=False),
            MODEL_NAME_FC: types.SimpleNamespace(underscore_to_dot=True)}
        sys.modules[_STANDIN] = standin
    data_dir()  # the version check
    # lazy: optional (bfcl_eval), imported after its stand-ins are in place
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker


def _language() -> Any:
    from bfcl_eval.constants.enums import Language  # lazy: optional (bfcl_eval)

    return Language.PYTHON


def decode(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The turn's calls as BFCL's decoded output ``[{name: {param: value}}]``; None when a
    call did not decode (invalid JSON, no name) — BFCL's decoder then fails as a whole."""
    out = []
    for c in calls:
        if c.get("name") is None or not isinstance(c.get("arguments"), dict):
            return None
        out.append({c["name"]: c["arguments"]})
    return out


def score(case: Case, calls: Sequence[Mapping[str, Any]],
          mode: str = "prompt") -> dict[str, Any]:
    """BFCL's verdict on one turn's ``calls`` (``{"name", "arguments"}``, arguments None
    for a call that did not parse): ``valid``, ``error_type`` (None when valid),
    ``sub_error_types`` (the parallel checkers' per-candidate error types) and
    ``error`` (BFCL's messages, as text). ``mode``: the calls' names are the functions'
    (``prompt``) or :func:`api_name`'s (``fc``: the checker maps the documents' names)."""
    decoded = decode(calls)
    if case.category == "irrelevance":
        called = decoded is not None and bool(decoded) and not (
            len(decoded) == 1 and not decoded[0])
        return {"valid": not called,
                "error_type": "irrelevance_error:decoder_success" if called else None,
                "sub_error_types": [],
                "error": ["Valid syntax. Successfully decode AST when it should not."]
                if called else []}
    if not decoded:
        return {"valid": False, "error_type": "ast_decoder:decoder_failed",
                "sub_error_types": [],
                "error": ["Invalid syntax. Failed to decode AST: "
                          + ("no call" if decoded == [] else "a call did not parse")]}
    result = _ast_checker()(list(case.functions), decoded, list(case.possible_answer or ()),
                            _language(), case.category,
                            MODEL_NAME_FC if mode == "fc" else MODEL_NAME)
    subs: list[str] = []
    for item in result.get("error", []):
        if isinstance(item, Mapping):
            subs += [str(v["sub_error_type"]) for v in item.values()
                     if isinstance(v, Mapping) and "sub_error_type" in v]
    return {"valid": bool(result["valid"]),
            "error_type": None if result["valid"] else str(result.get("error_type")),
            "sub_error_types": subs,
            "error": [e if isinstance(e, str) else json.dumps(e, sort_keys=True, default=str)
                      for e in result.get("error", [])]}


# ---------------------------------------------------------------------------- policies


def _first_value(values: Sequence[Any]) -> tuple[bool, Any]:
    """(given, value): the first acceptable value that is not BFCL's "leave out" mark."""
    for v in values:
        if v != "":
            return True, v
    return False, None


def _materialise(value: Any, param: Mapping[str, Any]) -> Any:
    """A concrete argument from one acceptable value: a dict parameter's acceptable value
    lists acceptable values per key (first one taken), a list of dicts likewise per item."""
    ptype = param.get("type")
    if ptype == "dict" and isinstance(value, Mapping):
        out = {}
        for key, options in value.items():
            if isinstance(options, list):
                given, v = _first_value(options)
                if given:
                    out[key] = v
            else:
                out[key] = options
        return out
    items = param.get("items") or {}
    if ptype in ("array", "tuple") and items.get("type") == "dict" and isinstance(value, list):
        return [_materialise(v, items) for v in value]
    return value


def _function(case: Case, name: str) -> Mapping[str, Any]:
    for f in case.functions:
        if f["name"] == name:
            return f
    raise UsageError(f"{case.id}: the possible answer names {name!r}, which is not offered")


def oracle_calls(case: Case) -> list[dict[str, Any]]:
    """One possible answer as calls ``{"name", "arguments"}`` (none for irrelevance)."""
    calls = []
    for expected in case.possible_answer or ():
        (name, params), = expected.items()
        props = _function(case, name)["parameters"].get("properties", {})
        args = {}
        for pname, values in params.items():
            if pname not in props:
                # a few possible answers list an optional parameter that the function
                # document does not have; the checker refuses it if given
                continue
            given, value = _first_value(values)
            if given:
                args[pname] = _materialise(value, props.get(pname, {}))
        calls.append({"name": name, "arguments": args})
    return calls


def _wrong_type(value: Any) -> Any:
    """A value of another JSON type: a string for any non-string, a list for a string."""
    return [value] if isinstance(value, str) else json.dumps(value)


def _fault(case: Case, call: dict[str, Any], policy: str) -> dict[str, Any]:
    fn = _function(case, call["name"])
    required = list(fn["parameters"].get("required", []))
    args = dict(call["arguments"])
    if policy == "wrong_name":
        offered = {f["name"] for f in case.functions}
        name = call["name"] + "_x"
        while name in offered:
            name += "_x"
        return {"name": name, "arguments": args}
    if policy == "missing_argument":
        for p in required:
            if p in args:
                del args[p]
                break
        return {"name": call["name"], "arguments": args}
    if policy == "wrong_type":
        props = fn["parameters"].get("properties", {})
        target = next((p for p in required if p in args), None) or next(iter(args), None)
        if target is not None:
            if props.get(target, {}).get("type") in ("string", "any"):
                args[target] = [args[target]]
            else:
                args[target] = _wrong_type(args[target])
        return {"name": call["name"], "arguments": args}
    raise UsageError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")


def policy_calls(case: Case, policy: str) -> list[dict[str, Any]]:
    """The calls a scripted policy makes on ``case`` (an empty list: it answers in text)."""
    if policy not in POLICIES:
        raise UsageError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    if case.category == "irrelevance":
        if policy == "oracle":
            return []
        fn = case.functions[0]
        return [{"name": fn["name"], "arguments": {}}]
    calls = oracle_calls(case)
    if policy == "oracle":
        return calls
    return [_fault(case, c, policy) for c in calls]


#: The text the oracle answers with on an irrelevance case (English, as the suite is).
DECLINE = "None of the available functions can answer this request."
