"""The conversion benchmark's tools: one converter per category of units, and their executor.

Each tool takes ``valor`` (a number), ``desde`` and ``hasta`` (units of its category) and
returns ``{"resultado": {"valor": <converted, 6 decimals>, "unidad": <hasta>}}``; a bad
call comes back as ``{"error": <Spanish text>}`` data, never raised (the model reads it).
Linear units convert through their factor to the category's base unit (metre, kilogram,
litre); temperatures through degrees Celsius. The factors are the exact definitions
(the international foot and pound, the US gallon).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["CATEGORIES", "TOOLS", "UNITS", "Converter", "convert", "tool_name"]

#: Each category's units with their factor to its base unit (temperatures: no factor).
UNITS: dict[str, dict[str, float]] = {
    "longitud": {"m": 1.0, "km": 1000.0, "cm": 0.01, "mm": 0.001, "mi": 1609.344,
                 "ft": 0.3048, "in": 0.0254, "yd": 0.9144},
    "masa": {"kg": 1.0, "g": 0.001, "t": 1000.0, "lb": 0.45359237, "oz": 0.028349523125},
    "temperatura": {"C": math.nan, "F": math.nan, "K": math.nan},
    "volumen": {"l": 1.0, "ml": 0.001, "m3": 1000.0, "gal": 3.785411784},
}
CATEGORIES = tuple(UNITS)

#: What the model reads of each category's units (Spanish).
_NAMES = {
    "longitud": "m (metro), km, cm, mm, mi (milla), ft (pie), in (pulgada), yd (yarda)",
    "masa": "kg, g, t (tonelada), lb (libra), oz (onza)",
    "temperatura": "C (grados Celsius), F (grados Fahrenheit), K (kelvin)",
    "volumen": "l (litro), ml, m3 (metro cúbico), gal (galón estadounidense)",
}


def tool_name(category: str) -> str:
    return f"convertir_{category}"


def _definition(category: str) -> dict[str, Any]:
    units = list(UNITS[category])
    return {"name": tool_name(category),
            "description": f"Convierte una cantidad de {category} de una unidad a otra. "
                           f"Unidades: {_NAMES[category]}.",
            "parameters": {
                "type": "object", "required": ["valor", "desde", "hasta"],
                "properties": {
                    "valor": {"type": "number", "description": "la cantidad a convertir"},
                    "desde": {"type": "string", "enum": units,
                              "description": "la unidad de la cantidad"},
                    "hasta": {"type": "string", "enum": units,
                              "description": "la unidad del resultado"}}}}


#: The tool definitions the model reads, by name.
TOOLS = {tool_name(c): _definition(c) for c in CATEGORIES}


def _celsius(value: float, unit: str) -> float:
    return {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[unit]


def convert(category: str, value: float, source: str, target: str) -> float:
    """``value`` in unit ``source`` expressed in unit ``target`` (both of ``category``)."""
    if category == "temperatura":
        c = _celsius(value, source)
        if c < -273.15 - 1e-9:
            raise ValueError(f"{value:g} {source} está por debajo del cero absoluto")
        return {"C": c, "F": c * 9 / 5 + 32, "K": c + 273.15}[target]
    factors = UNITS[category]
    return value * factors[source] / factors[target]


def _problems(category: str, args: Mapping[str, Any]) -> list[str]:
    """What is wrong with a call's arguments (Spanish), in the schema's order."""
    out = [f"{k}: falta el argumento" for k in ("valor", "desde", "hasta") if k not in args]
    value = args.get("valor")
    if "valor" in args and (isinstance(value, bool) or not isinstance(value, int | float)
                            or not math.isfinite(value)):
        out.append("valor: debe ser un número")
    for key in ("desde", "hasta"):
        if key in args and args[key] not in UNITS[category]:
            out.append(f"{key}: unidad desconocida {str(args[key])[:20]!r} "
                       f"(unidades: {', '.join(UNITS[category])})")
    out += [f"{str(k)[:40]}: campo no permitido" for k in args
            if k not in ("valor", "desde", "hasta")]
    return out


class Converter:
    """The executor of a conversion case (the loop's ``execute``): errors are data."""

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        category = name.removeprefix("convertir_") if isinstance(name, str) else ""
        if name not in TOOLS or (allowed is not None and name not in allowed):
            return {"error": f"herramienta desconocida: {name}"}
        if not isinstance(args, Mapping):
            return {"error": "argumentos no válidos: se esperaba un objeto JSON"}
        problems = _problems(category, args)
        if problems:
            return {"error": "argumentos no válidos: " + "; ".join(problems)}
        try:
            value = convert(category, float(args["valor"]), args["desde"], args["hasta"])
        except (ValueError, OverflowError) as exc:
            return {"error": str(exc)}
        if not math.isfinite(value):
            return {"error": "resultado fuera de rango"}
        return {"resultado": {"valor": round(value, 6), "unidad": args["hasta"]}}
