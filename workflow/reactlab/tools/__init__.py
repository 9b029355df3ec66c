"""The lesson's four deterministic tools: ``precio``, ``buscar_noticias``, ``calculadora``
and ``variacion``.

Argument models, descriptions and every string that reaches the model are word for word
those of lesson 6.4.1 (they are Spanish on purpose: changing them would change the
model's behaviour and its token counts). The behaviour is the lesson's too; only the
implementation differs: prices and news are indexed by ticker once, so that a call is a
bisection instead of a scan of the whole frame, and the calculator is hardened (caps on
length, parenthesis depth, tree depth, node count, digits per number and the result's
magnitude; division by zero, overflow, non-finite results) so that it always answers
with data, fast.

Arguments are validated strictly, without changing the JSON schema the model sees: no
lax coercion (a number or ``true`` where a string is expected is refused), no fields
beyond the schema's, dates that match the pattern with ASCII digits only and that exist
in the calendar. :func:`parse_arguments_strict` reads the model's argument text and
refuses duplicate keys and non-finite numbers.

Tool failures are not exceptions: :meth:`ToolBox.execute` returns ``{"error": ...}`` or
``{"resultado": ...}`` (always JSON-serialisable with ``allow_nan=False``) and never raises.
"""

from __future__ import annotations

from reactlab.core.errors import CalculatorError
from reactlab.tools.arguments import (
    DATE_PATTERN,
    TOOLS,
    CalculatorArgs,
    PriceArgs,
    TickerRangeArgs,
    ToolSpec,
    json_schema,
    parse_arguments_strict,
)
from reactlab.tools.calculator import (
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_EXPRESSION,
    MAX_NODES,
    MAX_PARENS,
    MAX_RESULT,
    calculate,
)
from reactlab.tools.toolbox import ToolBox

__all__ = [
    "DATE_PATTERN",
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_EXPRESSION",
    "MAX_NODES",
    "MAX_PARENS",
    "MAX_RESULT",
    "TOOLS",
    "CalculatorArgs",
    "CalculatorError",
    "PriceArgs",
    "TickerRangeArgs",
    "ToolBox",
    "ToolSpec",
    "calculate",
    "json_schema",
    "parse_arguments_strict",
]
