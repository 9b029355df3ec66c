"""The ``calculadora`` tool: arithmetic without eval(), hardened (:func:`calculate`).

Only ASCII numbers, + - * / and unary minus; caps on length, parenthesis depth, digits
in a row, tree depth, node count and the result's magnitude are checked before anything
is evaluated; every failure is a :class:`~reactlab.core.errors.CalculatorError` with the
lesson's Spanish message for the model."""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any, cast

from reactlab.core.errors import CalculatorError

# The calculator's caps, all checked before anything is evaluated. Longest expression it
# parses (longer ones are refused before parsing):
MAX_EXPRESSION = 256
# Deepest nesting of parentheses (a scan of the raw text, before parsing).
MAX_PARENS = 128
# Deepest expression tree and most expression nodes (numbers and operations). With the
# length cap neither can be reached; they bound the walk should that cap ever be raised.
MAX_DEPTH = 256
MAX_NODES = 256
# Most digits in a row (a number's integer part, its decimals or its exponent).
MAX_DIGITS = 30
# Largest magnitude of a result: integers stay exact in a double and in any JSON reader.
MAX_RESULT = 10**15

# --------------------------------------------------------------------------- calculator

_OPS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}

_MSG_ONLY_ARITHMETIC = "solo números, + - * / y paréntesis"
_MSG_INVALID_EXPRESSION = "expresión no válida"
_MSG_TOO_LONG = "expresión demasiado larga"
_MSG_TOO_COMPLEX = "expresión demasiado compleja"
_MSG_DIVISION_BY_ZERO = "división por cero"
_MSG_NOT_FINITE = "resultado no finito"
MSG_NUMBER_TOO_LONG = "número demasiado largo"
_MSG_TOO_LARGE = "resultado demasiado grande"

# The only characters an expression may have: ASCII digits, the decimal point, the
# exponent letter, the four operators, parentheses and blanks. Anything else (letters,
# "_" as in 1_000, "x" as in 0x10, "#" comments, non-ASCII digits such as "١" or "１",
# lone surrogates) is refused before parsing with the lesson's message "solo números...";
# control characters (NUL...) with "expresión no válida". "**" gets through this check
# and is refused as a power by the tree check, before anything is evaluated.
_ALLOWED_CHARS = frozenset("0123456789.eE+-*/() \t\n\r")
_DIGIT_RUN = re.compile(r"[0-9]+")


def _finite(x: int | float) -> int | float:
    if isinstance(x, float) and not math.isfinite(x):
        raise CalculatorError(_MSG_NOT_FINITE)
    return x


def _check_text(expression: str) -> None:
    """The checks on the raw text, before ``ast.parse`` sees it."""
    if len(expression) > MAX_EXPRESSION:
        raise CalculatorError(_MSG_TOO_LONG)
    for c in expression:
        if c not in _ALLOWED_CHARS:
            # Control characters (NUL...) are malformed text; anything else is not arithmetic.
            raise CalculatorError(_MSG_INVALID_EXPRESSION if c < " " or c == "\x7f"
                                  else _MSG_ONLY_ARITHMETIC)
    if any(len(m) > MAX_DIGITS for m in _DIGIT_RUN.findall(expression)):
        raise CalculatorError(MSG_NUMBER_TOO_LONG)
    depth = deepest = 0
    for c in expression:
        if c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
    if deepest > MAX_PARENS:
        raise CalculatorError(_MSG_TOO_COMPLEX)


def _check_tree(root: ast.expr) -> None:
    """Only numbers, + - * / and unary minus; depth and node count capped (iterative)."""
    stack: list[tuple[ast.expr, int]] = [(root, 1)]
    nodes = 0
    while stack:
        n, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH or nodes > MAX_NODES:
            raise CalculatorError(_MSG_TOO_COMPLEX)
        if isinstance(n, ast.Constant) and type(n.value) in (int, float):
            continue
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            stack.append((n.right, depth + 1))
            stack.append((n.left, depth + 1))
        elif isinstance(n, ast.UnaryOp) and type(n.op) in _OPS:
            stack.append((n.operand, depth + 1))
        else:
            raise CalculatorError(_MSG_ONLY_ARITHMETIC)


def _evaluate(root: ast.expr) -> int | float:
    """The lesson's tree walk, without recursion, every intermediate float finite.

    The tree has been checked by :func:`_check_tree`: it holds only numbers, + - * /
    and unary minus.
    """
    values: list[int | float] = []
    stack: list[tuple[ast.expr, bool]] = [(root, False)]
    while stack:
        n, ready = stack.pop()
        if isinstance(n, ast.Constant):
            values.append(_finite(cast(int | float, n.value)))  # _check_tree: a number
        elif isinstance(n, ast.BinOp):
            if ready:
                right = values.pop()
                left = values.pop()
                values.append(_finite(_OPS[type(n.op)](left, right)))
            else:
                stack += [(n, True), (n.right, False), (n.left, False)]
        elif isinstance(n, ast.UnaryOp):
            if ready:
                values.append(_finite(_OPS[type(n.op)](values.pop())))
            else:
                stack += [(n, True), (n.operand, False)]
        else:  # pragma: no cover - excluded by _check_tree
            raise CalculatorError(_MSG_ONLY_ARITHMETIC)
    return values.pop()


def calculate(expression: str) -> int | float:
    """Arithmetic without eval(): the expression tree is walked (lesson 6.4.1).

    Only ASCII numbers, + - * / and unary minus; the result is rounded to 4 decimals,
    finite, and at most :data:`MAX_RESULT` in magnitude. The caps (length, parenthesis
    depth, digits in a row, tree depth, node count) are checked before anything is
    evaluated, so that every call is fast. Every failure is an :class:`CalculatorError`
    (a ValueError) with a Spanish message for the model; nothing else is raised.
    """
    if not isinstance(expression, str):
        raise CalculatorError(_MSG_INVALID_EXPRESSION)
    expression = str.__str__(expression)  # a plain str, whatever subclass came in
    _check_text(expression)
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError):  # ValueError: NUL bytes, surrogates
        raise CalculatorError(_MSG_INVALID_EXPRESSION) from None
    except (RecursionError, MemoryError):
        raise CalculatorError(_MSG_TOO_COMPLEX) from None
    _check_tree(tree.body)
    try:
        x = _finite(round(_evaluate(tree.body), 4))
    except ZeroDivisionError:
        raise CalculatorError(_MSG_DIVISION_BY_ZERO) from None
    except OverflowError:
        raise CalculatorError(_MSG_NOT_FINITE) from None
    except (RecursionError, MemoryError):  # pragma: no cover - the walk is iterative
        raise CalculatorError(_MSG_TOO_COMPLEX) from None
    if abs(x) > MAX_RESULT:
        raise CalculatorError(_MSG_TOO_LARGE)
    return x
