"""Scripted "models": the scenario scripts of config.yaml turned into actions.

A script is a list of steps; step *k* is what the simulated model does on its *k*-th turn
(k = number of assistant turns already in the conversation, read from the request, so
the policy is stateless like a real API). A step either asks for tool calls or answers.
With ``repeat_last`` the last step repeats forever (the lesson's ``bucle``).

Strings in a step are templates in Python's format syntax over a small namespace:

* the task's ``params`` (``{ticker}``, ``{desde}``, ``{hasta}`` ...), and ``{question}``;
* ``results``: every tool result received so far, in order (``{"resultado": ...}`` or
  ``{"error": ...}`` dicts);
* ``ok``: the ``resultado`` values of the successful results only, in order, so that a
  script that first makes a mistake can still say ``{ok[0][cierre]}``.

Only item access (``[0]``, ``[cierre]``) is allowed, never attributes, so a config file
cannot reach Python internals.

Past its last step a script without ``repeat_last`` plays its last step again: asked to
go on after its final answer (agents with a submit step do that), the scripted model
repeats that answer. A script whose last step asks for calls has no answer to repeat
and refuses (ScriptError), as before.

**Results not shaped like the lesson's.** A client with its own tools may send back
results that are not ``{"resultado": ...}`` / ``{"error": ...}`` (a bare number, free
text read as ``{"texto": ...}``, another object). Then the scripted model still answers,
leniently: when the step cannot be rendered from the lesson-shaped results alone, such a
result counts in ``ok`` as itself (free text as its text, without fields: a key looked
up in it is ``?``); a key or index looked up in another plain value (a number, a string)
gives the value itself, so ``{ok[0][cierre]}`` of a bare ``191.5`` is ``191.5``; a
field the results still cannot fill is written ``?`` (its format spec dropped). What it
answers is then for the verifier to judge. With the lesson's results only, a field that
cannot be filled stays a ScriptError (a bug in the script).
"""

from __future__ import annotations

import importlib
import json
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reactlab.core.errors import ScriptError

ROOT_NAMES = frozenset({"results", "ok", "question"})

#: How ``str.format`` splits a field name (``ok[0][cierre]``) into its root name and its
#: lookups, ``(is_attribute, key)`` each: the function :class:`string.Formatter` uses,
#: from the C module ``_string`` (which has no type stubs; typed here once).
_split_field: Callable[[str], tuple[str | int, Iterable[tuple[bool, str | int]]]] = (
    importlib.import_module("_string").formatter_field_name_split)


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: Any = None  # rendered JSON value (normally a dict)
    raw_arguments: str | None = None  # sent verbatim instead of JSON (malformed calls)

    def arguments_text(self) -> str:
        """The arguments as the JSON text an API would carry."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments if self.arguments is not None else {})


@dataclass(frozen=True)
class Action:
    """What the scripted model does on one turn: tool calls, or a final text."""

    calls: tuple[ScriptedCall, ...] = ()
    text: str | None = None


class _Unfilled:
    """A field that foreign results cannot fill (lenient rendering): written ``?``."""


_UNFILLED = _Unfilled()


class FreeText(str):
    """Free text a tool sent back (what :func:`reactlab.simulate.parse_tool_output` reads
    as ``{"texto": ...}``), as ``ok`` holds it: written as its text, with no fields (a key
    looked up in it is unfilled, ``?``)."""


class _ItemOnlyFormatter(string.Formatter):
    def __init__(self, lenient: bool = False) -> None:
        self.lenient = lenient

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        first, rest = _split_field(field_name)
        if not isinstance(first, str) or first not in kwargs:  # a number: positional
            raise ScriptError(f"unknown name {{{first}}}")
        obj = kwargs[first]
        for is_attr, key in rest:
            if is_attr:
                raise ScriptError(f"attribute access is not allowed in {{{field_name}}}")
            if self.lenient and isinstance(obj, FreeText):
                return _UNFILLED, first  # free text has no fields
            if self.lenient and (isinstance(obj, str) or not isinstance(obj, Mapping | Sequence)):
                continue  # a plain value stands for itself
            if isinstance(obj, Sequence) and not isinstance(obj, str):
                try:
                    key = int(key)
                except (TypeError, ValueError) as exc:
                    if self.lenient:
                        return _UNFILLED, first
                    raise ScriptError(f"{{{field_name}}}: index {key!r} is not an integer") from exc
            try:
                obj = obj[key]
            except (IndexError, KeyError, TypeError) as exc:
                if self.lenient:
                    return _UNFILLED, first
                raise ScriptError(f"{{{field_name}}}: no item {key!r} in {obj!r}") from exc
        return obj, first

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        return value if value is _UNFILLED else super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        if value is _UNFILLED:
            return "?"
        if self.lenient:
            try:
                return super().format_field(value, format_spec)
            except (ValueError, TypeError):
                return str(value)
        return super().format_field(value, format_spec)


_FORMATTER = _ItemOnlyFormatter()
_LENIENT = _ItemOnlyFormatter(lenient=True)


def template_names(text: str) -> set[str]:
    """Root names a template refers to (``{ok[1][cierre]}`` → ``ok``)."""
    names: set[str] = set()
    try:
        for _, field, _, _ in string.Formatter().parse(text):
            if field is not None:
                if field == "" or field.isdigit():
                    raise ScriptError(f"positional field in template {text!r}")
                first, rest = _split_field(field)
                if any(is_attr for is_attr, _ in rest):
                    raise ScriptError(f"attribute access is not allowed in {{{field}}}")
                if not isinstance(first, str):  # {0[x]}: an item of a positional argument
                    raise ScriptError(f"positional field in template {text!r}")
                names.add(first)
    except ValueError as exc:
        raise ScriptError(f"malformed template {text!r}: {exc}") from exc
    return names


def render(value: Any, namespace: Mapping[str, Any], lenient: bool = False) -> Any:
    """Render every string inside ``value`` (recursively) against ``namespace``.

    ``lenient``: a field the namespace cannot fill is written ``?`` instead of raising
    (see the module docstring).
    """
    formatter = _LENIENT if lenient else _FORMATTER

    def render_text(text: str) -> str:
        try:
            return formatter.vformat(text, (), namespace)
        except ScriptError:
            raise
        except (ValueError, TypeError) as exc:
            raise ScriptError(f"cannot render {text!r}: {exc}") from exc

    return map_strings(value, render_text)


def map_strings(value: Any, change: Callable[[str], Any]) -> Any:
    """``value`` with ``change`` applied to every string inside it, through lists and the
    values of dicts (keys are left as they are); anything else is kept."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [map_strings(v, change) for v in value]
    if isinstance(value, dict):
        return {k: map_strings(v, change) for k, v in value.items()}
    return value


def _escaped(value: Any) -> Any:
    """``value`` with every brace of its strings doubled (keys are never rendered)."""
    return map_strings(value, lambda text: text.replace("{", "{{").replace("}", "}}"))


def literal(step: Mapping[str, Any]) -> dict[str, Any]:
    """A step whose rendering gives back exactly what it holds: every brace of the
    strings it renders doubled (a step written by a program from a benchmark's data,
    whose strings are text, never template fields). A ``branch`` keeps its ``if_seen``
    text as it is (it is matched, not rendered)."""
    if "branch" in step:
        b = step["branch"]
        return {"branch": {"if_seen": b["if_seen"], "then": literal(b["then"]),
                           "else": literal(b["else"])}}
    return {k: _escaped(v) for k, v in step.items()}


def is_lesson_result(result: Any) -> bool:
    """A tool result in the lesson's shape: ``{"resultado": ...}`` or ``{"error": ...}``."""
    return isinstance(result, Mapping) and ("resultado" in result or "error" in result)


def successes(results: Sequence[Any], foreign: bool = False) -> list[Any]:
    """``ok``: the ``resultado`` of each successful result; with ``foreign``, a result
    not in the lesson's shape counts as itself (free text, read as ``{"texto": ...}``,
    as its text)."""
    return [r["resultado"] if is_lesson_result(r) else _as_itself(r) for r in results
            if ("resultado" in r if is_lesson_result(r) else foreign)]


def _as_itself(result: Any) -> Any:
    """A foreign result as ``ok`` holds it: free text (what
    :func:`reactlab.simulate.parse_tool_output` reads as ``{"texto": ...}``) is its text,
    anything else itself."""
    if isinstance(result, dict) and set(result) == {"texto"} and isinstance(
            result["texto"], str):
        return FreeText(result["texto"])
    return result


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    return []


@dataclass(frozen=True)
class Script:
    """One scenario's script: ``steps`` as in config.yaml, and ``repeat_last``."""

    name: str
    steps: tuple[Mapping[str, Any], ...]
    repeat_last: bool = False

    @classmethod
    def from_config(cls, name: str, entry: Mapping[str, Any]) -> Script:
        return cls(name, tuple(entry["steps"]), bool(entry.get("repeat_last", False)))

    def names(self) -> set[str]:
        """Every root name the script's templates use."""
        return {n for step in self.steps for s in strings_in(step) for n in template_names(s)}

    def step_at(self, turn: int, seen: str = "") -> Mapping[str, Any]:
        """The step played on turn ``turn`` (branches resolved against ``seen``)."""
        past_end = turn >= len(self.steps)
        step = self.steps[min(turn, len(self.steps) - 1)]
        while "branch" in step:
            branch = step["branch"]
            step = branch["then"] if branch["if_seen"] in seen else branch["else"]
        if past_end and not self.repeat_last and "answer" not in step:
            raise ScriptError(
                f"script {self.name!r} has {len(self.steps)} steps, ends with calls and has "
                f"no repeat_last; the conversation asks for turn {turn + 1}")
        return step

    def action(self, turn: int, params: Mapping[str, Any], question: str,
               results: Sequence[Any], seen: str = "", *,
               lenient: bool | None = None) -> Action:
        """The action for assistant turn ``turn`` (0-based) given the results so far.

        ``seen`` is the tool output text exactly as the model was sent it; a ``branch``
        step picks ``then`` when its ``if_seen`` text appears there, ``else`` otherwise
        (this is how a scripted model "obeys" an instruction it can see verbatim). Past
        the last step the last step is played again (see the module docstring).
        ``lenient`` (default: when some result is not in the lesson's shape) writes a
        field the results cannot fill as ``?``.
        """
        return self.play(self.step_at(turn, seen), turn, params, question, results, lenient)

    def play(self, step: Mapping[str, Any], turn: int, params: Mapping[str, Any],
             question: str, results: Sequence[Any], lenient: bool | None = None) -> Action:
        """``step`` (a resolved step of this script, played on ``turn``) rendered."""
        where = f"script {self.name!r}, step {min(turn, len(self.steps) - 1) + 1}"
        try:
            return self._render(step, params, question, results, False)
        except ScriptError as exc:
            if lenient is None:
                lenient = not all(is_lesson_result(r) for r in results)
            if not lenient:
                raise ScriptError(f"{where}: {exc}") from exc
        return self._render(step, params, question, results, True)

    @staticmethod
    def _render(step: Mapping[str, Any], params: Mapping[str, Any], question: str,
                results: Sequence[Any], lenient: bool) -> Action:
        namespace = {
            **params,
            "question": question,
            "results": list(results),
            "ok": successes(results, foreign=lenient),
        }
        if "answer" in step:
            return Action(text=render(step["answer"], namespace, lenient))
        return Action(calls=tuple(
            ScriptedCall(
                name=render(c["name"], namespace, lenient),
                arguments=render(c.get("arguments", {}), namespace, lenient)
                if "raw_arguments" not in c else None,
                raw_arguments=render(c["raw_arguments"], namespace, lenient)
                if "raw_arguments" in c else None,
            )
            for c in step["calls"]
        ))
