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
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reactlab.core.errors import ScriptError

ROOT_NAMES = frozenset({"results", "ok", "question"})


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


class _ItemOnlyFormatter(string.Formatter):
    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        first, rest = string._string.formatter_field_name_split(field_name)  # type: ignore[attr-defined]
        if first not in kwargs:
            raise ScriptError(f"unknown name {{{first}}}")
        obj = kwargs[first]
        for is_attr, key in rest:
            if is_attr:
                raise ScriptError(f"attribute access is not allowed in {{{field_name}}}")
            if isinstance(obj, Sequence) and not isinstance(obj, str):
                try:
                    key = int(key)
                except (TypeError, ValueError) as exc:
                    raise ScriptError(f"{{{field_name}}}: index {key!r} is not an integer") from exc
            try:
                obj = obj[key]
            except (IndexError, KeyError, TypeError) as exc:
                raise ScriptError(f"{{{field_name}}}: no item {key!r} in {obj!r}") from exc
        return obj, first


_FORMATTER = _ItemOnlyFormatter()


def template_names(text: str) -> set[str]:
    """Root names a template refers to (``{ok[1][cierre]}`` → ``ok``)."""
    names: set[str] = set()
    try:
        for _, field, _, _ in string.Formatter().parse(text):
            if field is not None:
                if field == "" or field.isdigit():
                    raise ScriptError(f"positional field in template {text!r}")
                first, rest = string._string.formatter_field_name_split(field)  # type: ignore[attr-defined]
                if any(is_attr for is_attr, _ in rest):
                    raise ScriptError(f"attribute access is not allowed in {{{field}}}")
                names.add(first)
    except ValueError as exc:
        raise ScriptError(f"malformed template {text!r}: {exc}") from exc
    return names


def render(value: Any, namespace: Mapping[str, Any]) -> Any:
    """Render every string inside ``value`` (recursively) against ``namespace``."""
    if isinstance(value, str):
        try:
            return _FORMATTER.vformat(value, (), namespace)
        except ScriptError:
            raise
        except (ValueError, TypeError) as exc:
            raise ScriptError(f"cannot render {value!r}: {exc}") from exc
    if isinstance(value, list):
        return [render(v, namespace) for v in value]
    if isinstance(value, dict):
        return {k: render(v, namespace) for k, v in value.items()}
    return value


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

    def action(self, turn: int, params: Mapping[str, Any], question: str,
               results: Sequence[Mapping[str, Any]], seen: str = "") -> Action:
        """The action for assistant turn ``turn`` (0-based) given the results so far.

        ``seen`` is the tool output text exactly as the model was sent it; a ``branch``
        step picks ``then`` when its ``if_seen`` text appears there, ``else`` otherwise
        (this is how a scripted model "obeys" an instruction it can see verbatim).
        """
        if turn >= len(self.steps):
            if not self.repeat_last:
                raise ScriptError(
                    f"script {self.name!r} has {len(self.steps)} steps and no repeat_last; "
                    f"the conversation asks for turn {turn + 1}"
                )
            turn = len(self.steps) - 1
        step = self.steps[turn]
        while "branch" in step:
            branch = step["branch"]
            step = branch["then"] if branch["if_seen"] in seen else branch["else"]
        namespace = {
            **params,
            "question": question,
            "results": list(results),
            "ok": [r["resultado"] for r in results if isinstance(r, Mapping) and "resultado" in r],
        }
        where = f"script {self.name!r}, step {turn + 1}"
        try:
            if "answer" in step:
                return Action(text=render(step["answer"], namespace))
            calls = tuple(
                ScriptedCall(
                    name=render(c["name"], namespace),
                    arguments=render(c.get("arguments", {}), namespace)
                    if "raw_arguments" not in c else None,
                    raw_arguments=render(c["raw_arguments"], namespace)
                    if "raw_arguments" in c else None,
                )
                for c in step["calls"]
            )
        except ScriptError as exc:
            raise ScriptError(f"{where}: {exc}") from exc
        return Action(calls=calls)
