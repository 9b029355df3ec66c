"""What the lesson pins in the data: every value it prints about BUSI (its name, four
closes and the takeover headline), which generated data holds by construction and the
user's own data is checked for."""

from __future__ import annotations

BUSI_TICKER = "BUSI"
BUSI_NAME = "Busmar Hogar"
BUSI_ANCHORS: dict[str, float] = {
    "2024-01-03": 27.75,
    "2024-03-01": 25.20,
    "2024-03-15": 26.19,
    "2024-03-22": 27.88,
}
BUSI_EVENT = "Un fondo ofrece comprar Busmar Hogar"
