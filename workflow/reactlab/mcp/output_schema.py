"""A tool's declared ``outputSchema``, checked against each of its results.

The MCP specification (2025-06-18 on) lets a server declare, beside a tool's
``inputSchema``, the JSON Schema of its structured result: a result of that tool that is
not an error must then carry ``structuredContent`` that conforms to it. The project's
client holds the server to it: a result without ``structuredContent``, or with one that
breaks the schema, reaches the model as an error, as data, in the lesson's Spanish
(:data:`BROKEN`), and the trace records the call ``nonconforming`` (a status of its
own, so that a table can count such calls apart from the tool's own errors).

The check is ``jsonschema``'s (the schema's own ``$schema`` dialect, JSON Schema
2020-12 when it names none; formats are annotations; no reference is fetched). Its
message (the validator's own, in English) follows the Spanish text with the place in
``structuredContent`` where the result first breaks the schema, so the same answer gives
the same text in a replay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
import referencing.exceptions

__all__ = ["BROKEN", "OutputSchemas"]

BROKEN = "el resultado no cumple el esquema declarado por la herramienta: {detail}"
MISSING = "no trae structuredContent"
NOT_A_SCHEMA = "la herramienta declara un esquema de salida que no es un esquema JSON válido"
UNRESOLVABLE = "el esquema declarado tiene una referencia que no se puede resolver"
#: The longest validator message kept (a message quotes the value that broke the schema).
MESSAGE_CHARS = 300


def _place(path: Sequence[Any]) -> str:
    return "structuredContent" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                                         for p in path)


class OutputSchemas:
    """The output schemas of a run's tools (a spec's tool definitions: ``output_schema``
    where the server declared one), each checked once to be a schema."""

    def __init__(self, tools: Sequence[Mapping[str, Any]]) -> None:
        self._validators: dict[str, Any] = {}
        for tool in tools:
            schema = tool.get("output_schema")
            if not isinstance(schema, dict):
                continue
            cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator)
            try:
                cls.check_schema(schema)
            except jsonschema.exceptions.SchemaError:
                self._validators[tool["name"]] = None
                continue
            self._validators[tool["name"]] = cls(schema)

    def __contains__(self, name: object) -> bool:
        return name in self._validators

    def problem(self, name: str, response: Mapping[str, Any]) -> str | None:
        """What the model reads of a result of tool ``name`` that breaks its declared
        schema (:data:`BROKEN`), or None: it conforms, the tool declares none, or the
        result is an error (``isError``: not held to the schema)."""
        if name not in self._validators or response.get("isError") is True:
            return None
        validator = self._validators[name]
        structured = response.get("structuredContent")
        if validator is None:
            detail: str | None = NOT_A_SCHEMA
        elif not isinstance(structured, dict):
            detail = MISSING
        else:
            detail = self._first_error(validator, structured)
        return None if detail is None else BROKEN.format(detail=detail)

    @staticmethod
    def _first_error(validator: Any, structured: dict[str, Any]) -> str | None:
        try:
            errors = list(validator.iter_errors(structured))
        except referencing.exceptions.Unresolvable:
            return UNRESOLVABLE
        if not errors:
            return None
        best = jsonschema.exceptions.best_match(errors)
        message = best.message
        if len(message) > MESSAGE_CHARS:
            message = message[:MESSAGE_CHARS] + "..."
        return f"{_place(best.absolute_path)}: {message}"
