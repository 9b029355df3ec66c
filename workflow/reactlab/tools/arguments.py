"""What the model is told about each tool (:data:`TOOLS`: name, Spanish description,
argument model and its JSON schema) and how its argument text is read: the strict
argument models (no coercion, no extra fields, real ASCII dates) and
:func:`parse_arguments_strict` (no duplicate keys, no non-finite numbers)."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator
from pydantic_core import PydanticCustomError

from reactlab.core.errors import JSONRefused
from reactlab.core.io import DuplicateKeyError, NonFiniteConstantError, loads_strict
from reactlab.tools.calculator import MSG_NUMBER_TOO_LONG

DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"


def _ascii_real_date(v: str) -> str:
    """After the pattern: ASCII digits only (the schema's ``\\d`` means 0-9 to the model,
    but the regex engine would take any Unicode digit), and a date that exists."""
    if not v.isascii():
        # The same error (and message) as a pattern mismatch, which is what it is.
        raise PydanticCustomError(
            "string_pattern_mismatch", "String should match pattern '{pattern}'",
            {"pattern": DATE_PATTERN})
    try:
        dt.date.fromisoformat(v)
    except ValueError:
        raise PydanticCustomError(
            "fecha_inexistente", "fecha inexistente: {fecha}", {"fecha": v}) from None
    return v


class _Args(BaseModel):
    """Strict validation (no coercion); ``strict`` leaves the JSON schema as it is.

    Extra fields are refused by :meth:`ToolBox.execute`, not with ``extra="forbid"``,
    which would add ``additionalProperties`` to the schema the model sees.
    """

    model_config = ConfigDict(strict=True)


# No docstrings on the argument models: pydantic would put them in the schema the model
# reads, as "description".


class PriceArgs(_Args):  # precio: a ticker and a date
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    fecha: str = Field(pattern=DATE_PATTERN)

    _date = field_validator("fecha")(_ascii_real_date)


class TickerRangeArgs(_Args):
    # buscar_noticias and variacion: a ticker and two dates (the lesson's ArgsNoticias
    # and ArgsVariacion, which were identical; TOOLS gives each tool its lesson name).
    ticker: str = Field(pattern=r"^[A-Z]{4}$")
    desde: str = Field(pattern=DATE_PATTERN)
    hasta: str = Field(pattern=DATE_PATTERN)

    _dates = field_validator("desde", "hasta")(_ascii_real_date)


class CalculatorArgs(_Args):  # calculadora: an arithmetic expression
    expresion: str


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and argument schema."""

    name: str
    description: str
    args_model: type[BaseModel]


def _as_seen(model: type[_Args], name: str) -> type[_Args]:
    """``model`` under the class name the model reads: the lesson's (``ArgsPrecio`` ...).

    Pydantic puts the class name in the schema's ``title`` and in the "instance of ..."
    error, so that name is part of what the model reads and stays the lesson's, word for
    word; the Python definitions keep English names.
    """
    return create_model(name, __base__=model)


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "precio",
            "Cierre de una acción en una sesión (la última sesión en o antes de la fecha).",
            _as_seen(PriceArgs, "ArgsPrecio"),
        ),
        ToolSpec(
            "buscar_noticias",
            "Titulares de noticias de una acción entre dos fechas (AAAA-MM-DD).",
            _as_seen(TickerRangeArgs, "ArgsNoticias"),
        ),
        ToolSpec(
            "calculadora",
            "Evalúa una expresión aritmética con + - * / y paréntesis.",
            _as_seen(CalculatorArgs, "ArgsCalculadora"),
        ),
        ToolSpec(
            "variacion",
            "Variación porcentual del cierre de una acción entre dos fechas (AAAA-MM-DD), "
            "calculada con los dos cierres.",
            _as_seen(TickerRangeArgs, "ArgsVariacion"),
        ),
    )
}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, as the model sees it."""
    return TOOLS[name].args_model.model_json_schema()


# --------------------------------------------------------------------------- arguments

_MSG_INVALID_JSON = "JSON no válido"
_MSG_NOT_AN_OBJECT = "los argumentos deben ser un objeto JSON"
_MSG_TOO_NESTED = "JSON demasiado anidado"
# Longest integer literal accepted in argument text (Python refuses more than 4300).
_MAX_JSON_DIGITS = 1000


class _ArgumentsError(JSONRefused):
    """Argument text the strict reader refuses (its Spanish message is for the model)."""


def _finite_float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise _ArgumentsError(f"número no finito: {text}")
    return x


def _bounded_int(text: str) -> int:
    if len(text) > _MAX_JSON_DIGITS:
        raise _ArgumentsError(MSG_NUMBER_TOO_LONG)
    return int(text)


def parse_arguments_strict(text: object) -> dict[str, Any] | str:
    """A tool call's argument text as a dict, or a Spanish error message for the model.

    Stricter than ``json.loads``: a key repeated in an object ("clave duplicada: fecha"),
    NaN / Infinity / -Infinity, numbers that overflow to infinity (1e400) and integers of
    more than a thousand digits are refused, and the value must be a JSON object.
    Never raises.
    """
    if not isinstance(text, str):
        return _MSG_INVALID_JSON
    try:
        value = loads_strict(text, parse_float=_finite_float, parse_int=_bounded_int)
    except _ArgumentsError as e:
        return str(e)
    except DuplicateKeyError as e:
        return f"clave duplicada: {e.key}"
    except NonFiniteConstantError as e:
        return f"valor no permitido: {e.name}"
    except RecursionError:
        return _MSG_TOO_NESTED
    except (ValueError, TypeError, MemoryError):
        return _MSG_INVALID_JSON
    if not isinstance(value, dict):
        return _MSG_NOT_AN_OBJECT
    return value
