"""The tool source ``divisas``: exchange-rate tools over a small deterministic table.

A reactlab tool source outside reactlab (docs/plugins.md): :data:`TOOL_SOURCE` has the
members of ``reactlab.tools.sources.ToolSource`` and is declared by this package's entry
point ``divisas`` in the group ``reactlab.tool_sources``. A config names it under
``tool_sources:`` (``plugin: divisas``, its ``settings``), and a task takes its tools
with ``tool_source: <that entry>``.

* Tools (what the model reads is Spanish): ``tipo_cambio(origen, destino, fecha)``, the
  rate of one currency in another on a date, and ``convertir(importe, origen, destino,
  fecha)``, an amount converted at that rate, less the source's commission.
* Data: ``tipos_cambio.json`` (package data), units of each currency per euro on ten
  working days of March 2024 (illustrative rates, not quotes). A date without a row (a
  weekend) takes the last rate before it, as a close does; a date before the first row
  or after the last is an error.
* Settings (``tool_sources.<name>.settings``, extra keys refused): ``comision``, the
  fraction ``convertir`` keeps (0 to 0.1, default 0), and ``decimales``, the decimals of
  a converted amount (0 to 6, default 2).
* A bad call (an unknown tool or currency, a missing or extra argument, a bad date, an
  amount that is not a positive number) comes back as ``{"error": <Spanish text>}``
  data, never raised; a result as ``{"resultado": {...}}``, as the lesson's tools do.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import math
import re
from collections.abc import Collection, Mapping
from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TOOL_SOURCE", "Divisas", "DivisasSettings", "DivisasSource"]


class DivisasSettings(BaseModel):
    """The typed settings of a ``divisas`` tool source."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    comision: float = Field(0.0, ge=0.0, le=0.1)
    decimales: int = Field(2, ge=0, le=6)


class Rates:
    """The rate table: units of each currency per euro, by date (sorted)."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.dates = sorted(doc["tipos"])
        self.per_euro = {d: {"EUR": 1.0, **doc["tipos"][d]} for d in self.dates}
        self.currencies = tuple(sorted(self.per_euro[self.dates[0]]))

    def on(self, fecha: str) -> str:
        """The table's date for ``fecha``: that date, else the last one before it."""
        if fecha < self.dates[0]:
            raise ValueError(f"no hay tipos de cambio antes del {self.dates[0]}")
        if fecha > self.dates[-1]:
            raise ValueError(f"no hay tipos de cambio después del {self.dates[-1]}")
        day: str = self.dates[bisect.bisect_right(self.dates, fecha) - 1]
        return day

    def rate(self, origen: str, destino: str, fecha: str) -> tuple[str, float]:
        """(the table's date, units of ``destino`` per unit of ``origen``)."""
        day = self.on(fecha)
        row = self.per_euro[day]
        return day, round(row[destino] / row[origen], 6)



@cache
def rates() -> Rates:
    """The package's table, read once."""
    text = resources.files(__package__).joinpath("tipos_cambio.json").read_text("utf-8")
    return Rates(json.loads(text))


_CURRENCY = {"type": "string", "pattern": "^[A-Z]{3}$"}
_DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$",
         "description": "la fecha del tipo de cambio, AAAA-MM-DD"}
_ARGUMENTS = {"tipo_cambio": ("origen", "destino", "fecha"),
              "convertir": ("importe", "origen", "destino", "fecha")}


def definitions(settings: DivisasSettings, currencies: Collection[str]) -> list[dict[str, Any]]:
    """The tool definitions the model reads (Spanish), the commission stated."""
    names = ", ".join(currencies)
    origen = {**_CURRENCY, "description": f"la moneda de partida (código ISO: {names})"}
    destino = {**_CURRENCY, "description": f"la moneda de llegada (código ISO: {names})"}
    fee = (f" Se descuenta una comisión del {settings.comision * 100:g} %."
           if settings.comision else " Sin comisión.")
    return [
        {"name": "tipo_cambio",
         "description": "Devuelve cuántas unidades de la moneda de llegada vale una unidad "
                        "de la moneda de partida en una fecha (el último tipo publicado "
                        "hasta esa fecha).",
         "parameters": {"type": "object", "required": list(_ARGUMENTS["tipo_cambio"]),
                        "properties": {"origen": origen, "destino": destino,
                                       "fecha": _DATE}}},
        {"name": "convertir",
         "description": "Convierte un importe de una moneda a otra al tipo de cambio de "
                        "una fecha." + fee,
         "parameters": {"type": "object", "required": list(_ARGUMENTS["convertir"]),
                        "properties": {"importe": {"type": "number",
                                                   "description": "el importe a convertir, "
                                                                  "mayor que cero"},
                                       "origen": origen, "destino": destino,
                                       "fecha": _DATE}}},
    ]


def _date_problem(value: object) -> str | None:
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            dt.date.fromisoformat(value)
            return None
        except ValueError:
            return f"fecha: fecha inexistente: {value}"
    return f"fecha: se esperaba una fecha AAAA-MM-DD, no {str(value)[:20]!r}"


def problems(name: str, args: Mapping[str, Any], currencies: Collection[str]) -> list[str]:
    """What is wrong with a call's arguments (Spanish), in the schema's order."""
    expected = _ARGUMENTS[name]
    out = [f"{k}: falta el argumento" for k in expected if k not in args]
    if "importe" in args:
        v = args["importe"]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                or v <= 0:
            out.append("importe: debe ser un número mayor que cero")
    for key in ("origen", "destino"):
        if key in args and args[key] not in currencies:
            out.append(f"{key}: moneda desconocida {str(args[key])[:20]!r} "
                       f"(monedas: {', '.join(currencies)})")
    if "fecha" in args:
        out += [p for p in (_date_problem(args["fecha"]),) if p]
    out += [f"{str(k)[:40]}: campo no permitido" for k in args if k not in expected]
    return out


class Divisas:
    """The executor of one run (what :meth:`DivisasSource.open` returns)."""

    def __init__(self, settings: DivisasSettings, table: Rates) -> None:
        self.settings, self.table = settings, table

    def execute(self, name: str, args: object,
                allowed: Collection[str] | None = None) -> dict[str, Any]:
        """Run tool ``name``: ``{"resultado": ...}``, or ``{"error": ...}``; never raises."""
        if name not in _ARGUMENTS or (allowed is not None and name not in allowed):
            return {"error": f"herramienta desconocida: {str(name)[:40]}"}
        if not isinstance(args, Mapping):
            return {"error": "argumentos no válidos: se esperaba un objeto JSON"}
        found = problems(name, args, self.table.currencies)
        if found:
            return {"error": "argumentos no válidos: " + "; ".join(found)}
        try:
            day, rate = self.table.rate(args["origen"], args["destino"], args["fecha"])
        except ValueError as exc:
            return {"error": str(exc)}
        out: dict[str, Any] = {"origen": args["origen"], "destino": args["destino"],
                               "fecha": day, "tipo": rate}
        if name == "convertir":
            fee = self.settings.comision
            out = {"importe": args["importe"], **out, "comision": fee,
                   "importe_convertido": round(args["importe"] * rate * (1 - fee),
                                               self.settings.decimales)}
        return {"resultado": out}


class DivisasSource:
    """The tool source ``divisas`` (``reactlab.tools.sources.ToolSource``)."""

    name = "divisas"
    settings = DivisasSettings
    packages = ("reactlab-example-plugin",)

    def tools(self, settings: DivisasSettings) -> list[dict[str, Any]]:
        return definitions(settings, rates().currencies)

    def open(self, settings: DivisasSettings) -> Divisas:
        return Divisas(settings, rates())


#: The entry point ``divisas`` (group ``reactlab.tool_sources``).
TOOL_SOURCE = DivisasSource()
