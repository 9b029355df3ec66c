"""A result table as LaTeX (booktabs), beside its CSV: ``results/tables/<name>.tex``.

The file is a ``tabular`` alone (``\\toprule`` ... ``\\bottomrule``: load ``booktabs``),
written from the same data frame as the CSV by the same job, so a paper's
``\\input{summary_by_backend.tex}`` shows the numbers of ``summary_by_backend.csv``,
cell for cell: floats with the CSV's four decimals, an empty cell as ``--``, names with
LaTeX's special characters escaped. Its own ``table`` environment and caption are the
paper's. The bytes are a function of the table alone (pandas' ``DataFrame.to_latex``,
through jinja2, which Snakemake depends on).

A benchmark's tables (``bfcl.csv``, ``agentdojo.csv``: :mod:`reactlab.suites`) are
written by the benchmark's own code; their twins are made from the CSV as written
(:func:`csv_to_latex`, by the same job): each cell as the file has it, a decimal number
with four decimals, a column of numbers right-aligned, as above.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DIGITS", "csv_to_latex", "to_latex"]

#: Decimals of a float cell: the CSV's (``reactlab.analysis.tables.FLOAT_DIGITS``).
DIGITS = 4


def _float(value: float) -> str:
    return f"{value:.{DIGITS}f}"


def to_latex(df: pd.DataFrame, source: str, column_format: str | None = None) -> str:
    """``df`` as a booktabs ``tabular``, after a comment naming ``source`` (its CSV)."""
    blank = df.astype(str).eq("")  # an empty text cell is empty, as a missing number
    body = df.where(~blank).to_latex(index=False, escape=True, na_rep="--",
                                     float_format=_float, column_format=column_format)
    return f"% {source} (reactlab; booktabs)\n{body}"


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _cell(cell: str) -> str:
    """A decimal number with :data:`DIGITS` decimals; any other cell as it is."""
    return _float(float(cell)) if "." in cell and _number(cell) else cell


def csv_to_latex(csv_path: str | Path, source: str) -> str:
    """The CSV file ``csv_path`` as :func:`to_latex` writes a table: its cells as the
    file has them (a decimal number with :data:`DIGITS` decimals), a column whose
    non-empty cells are all numbers right-aligned."""
    import pandas as pd  # lazy: heavy (pandas)

    with Path(csv_path).open(encoding="utf-8", newline="") as fh:
        head, *rows = list(csv.reader(fh))
    df = pd.DataFrame([[_cell(c) for c in r] for r in rows], columns=head, dtype=object)
    align = "".join("r" if rows and all(_number(r[i]) for r in rows if r[i]) and
                    any(r[i] for r in rows) else "l" for i in range(len(head)))
    return to_latex(df, source, column_format=align)
