"""A result table as LaTeX (booktabs), beside its CSV: ``results/tables/<name>.tex``.

The file is a ``tabular`` alone (``\\toprule`` ... ``\\bottomrule``: load ``booktabs``),
written from the same data frame as the CSV by the same job, so a paper's
``\\input{summary_by_backend.tex}`` shows the numbers of ``summary_by_backend.csv``,
cell for cell: floats with the CSV's four decimals, an empty cell as ``--``, names with
LaTeX's special characters escaped. Its own ``table`` environment and caption are the
paper's. The bytes are a function of the table alone (pandas' ``DataFrame.to_latex``,
through jinja2, which Snakemake depends on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DIGITS", "to_latex"]

#: Decimals of a float cell: the CSV's (``reactlab.analysis.tables.FLOAT_DIGITS``).
DIGITS = 4


def _float(value: float) -> str:
    return f"{value:.{DIGITS}f}"


def to_latex(df: pd.DataFrame, source: str) -> str:
    """``df`` as a booktabs ``tabular``, after a comment naming ``source`` (its CSV)."""
    blank = df.astype(str).eq("")  # an empty text cell is empty, as a missing number
    body = df.where(~blank).to_latex(index=False, escape=True, na_rep="--",
                                     float_format=_float)
    return f"% {source} (reactlab; booktabs)\n{body}"
