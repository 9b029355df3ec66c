"""What ``reactlab mcp`` lists for a tool (docs/mcp.md, "What a client sees").

The argument schema is the one the model reads in a run (:func:`reactlab.tools.json_schema`,
what the API adapters send) with two additions for MCP clients, made on a copy: a Spanish
``description`` on each argument, and ``additionalProperties: false`` at the top (the
executor refuses an extra field, ``campo no permitido``; the model's schema leaves the
keyword out, see ``reactlab.tools.arguments._Args``). Nothing else is changed: removing
those two additions gives back the model's schema, byte for byte below the top level.

Each tool also has an ``outputSchema``: the lesson's ``{"resultado": ...}`` object of a
success, which is the call's ``structuredContent``. The schemas describe what
:class:`reactlab.tools.ToolBox` returns; the official client validates every structured
result against them (tests/test_mcp_server.py).

The model's own schema and descriptions (:data:`reactlab.tools.TOOLS`) are not touched, so
what a run sends the model (tests/golden, the lesson's token table) stays as it is.
"""

from __future__ import annotations

import copy
from typing import Any

from reactlab.core.errors import InternalError
from reactlab.tools import DATE_PATTERN, json_schema

_TICKER = "Símbolo de la acción: cuatro letras mayúsculas (p. ej. BUSI)."

#: A Spanish description of each argument of each tool, in the schema's order.
ARGUMENTS: dict[str, dict[str, str]] = {
    "precio": {
        "ticker": _TICKER,
        "fecha": "Fecha de la sesión (AAAA-MM-DD); si ese día no hubo sesión, cuenta la "
                 "última anterior.",
    },
    "buscar_noticias": {
        "ticker": _TICKER,
        "desde": "Primer día de la búsqueda (AAAA-MM-DD, UTC), incluido.",
        "hasta": "Último día de la búsqueda (AAAA-MM-DD, UTC), incluido.",
    },
    "calculadora": {
        "expresion": "Expresión aritmética: números, + - * / y paréntesis "
                     "(p. ej. (27.88 - 26.19) / 26.19 * 100).",
    },
    "variacion": {
        "ticker": _TICKER,
        "desde": "Fecha inicial (AAAA-MM-DD): su cierre, o el de la última sesión anterior.",
        "hasta": "Fecha final (AAAA-MM-DD): su cierre, o el de la última sesión anterior.",
    },
}


def _date(description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": DATE_PATTERN, "description": description}


def _object(description: str | None, properties: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object"}
    if description is not None:
        out["description"] = description
    return {**out, "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _close(description: str) -> dict[str, Any]:
    """``precio``'s result: a ticker's close in one session."""
    return _object(description, {
        "ticker": {"type": "string", "description": "Símbolo de la acción."},
        "fecha": _date("Fecha de la sesión cuyo cierre se da (AAAA-MM-DD)."),
        "cierre": {"type": "number", "description": "Precio de cierre, redondeado a dos "
                                                    "decimales."},
    })


#: The schema of each tool's ``resultado`` (what :class:`~reactlab.tools.ToolBox` returns).
RESULTS: dict[str, dict[str, Any]] = {
    "precio": _close("El cierre de la última sesión en o antes de la fecha."),
    "buscar_noticias": {
        "type": "array", "maxItems": 5,
        "description": "Hasta cinco titulares distintos entre las dos fechas, por fecha.",
        "items": _object(None, {
            "fecha": _date("Día del titular (AAAA-MM-DD, UTC)."),
            "titular": {"type": "string", "description": "El titular."},
        }),
    },
    "calculadora": {"type": "number", "description": "El valor de la expresión."},
    "variacion": _object("La variación y los dos cierres de los que se calcula.", {
        "desde": _close("El cierre inicial."),
        "hasta": _close("El cierre final."),
        "variacion_pct": {"type": "number", "description": "Variación porcentual del "
                          "cierre inicial al final, redondeada a dos decimales."},
    }),
}


def input_schema(name: str) -> dict[str, Any]:
    """Tool ``name``'s argument schema as listed: the model's, with a description on each
    argument and ``additionalProperties: false``."""
    schema = copy.deepcopy(json_schema(name))
    descriptions = ARGUMENTS[name]
    if list(schema["properties"]) != list(descriptions):
        raise InternalError(f"{name}: the arguments {list(schema['properties'])} have the "
                             f"descriptions of {list(descriptions)}")
    for prop, description in descriptions.items():
        schema["properties"][prop]["description"] = description
    schema["additionalProperties"] = False
    return schema


def output_schema(name: str) -> dict[str, Any]:
    """Tool ``name``'s ``outputSchema``: the ``{"resultado": ...}`` object of a success."""
    return _object(None, {"resultado": copy.deepcopy(RESULTS[name])})
