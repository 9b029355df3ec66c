"""Cost of a run from the config's pricing table (USD per million tokens).

``pricing.models`` gives input and output prices per model; ``pricing.backends`` says at
which model's prices a backend's runs are costed. For a live backend that is what the run
cost (as far as the tokens counted here match the provider's); for a simulated, scripted
or local backend it is a what-if: what the same tokens would cost at that model's prices.
Tokens in are the tokens sent (``tokens_sent``); tokens out are the ``tokens_out`` of the
trace's requests. A backend without a price gets no cost (empty cells), never a zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PER = 1_000_000


def run_cost(backend: str, tokens_in: int, tokens_out: int,
             pricing: Mapping[str, Any] | None) -> float | None:
    """USD for one run, or None when the backend has no price."""
    if not pricing or backend not in pricing.get("backends", {}):
        return None
    price = pricing["models"][pricing["backends"][backend]]
    return float(tokens_in * price["input"] + tokens_out * price["output"]) / PER


def priced_model(backend: str, pricing: Mapping[str, Any] | None) -> str | None:
    if not pricing:
        return None
    model = pricing.get("backends", {}).get(backend)
    return None if model is None else str(model)
