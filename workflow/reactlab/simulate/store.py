"""The answers a server keeps (``previous_response_id``, ``GET /v1/responses/{id}``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class ResponseStore:
    """A bounded in-memory store of answers by id (least recently used dropped): what a
    server keeps for ``GET /v1/responses/{id}`` and ``previous_response_id``."""

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._items: OrderedDict[str, tuple[list[Any], dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: str, conversation: list[Any], answer: dict[str, Any]) -> None:
        """Keep ``answer`` and the input ``conversation`` it answered."""
        with self._lock:
            self._items[key] = (conversation, answer)
            self._items.move_to_end(key)
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def get(self, key: str) -> tuple[list[Any], dict[str, Any]] | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item
