"""Per-call atomicity for moto's DynamoDB, which checks conditions without a lock."""

from __future__ import annotations

import threading
from typing import Any


class AtomicCalls:
    """moto's DynamoDB checks conditions and writes without a lock, so two threads can
    both pass one condition. Real DynamoDB makes each API call atomic; this proxy gives
    moto the same per-call atomicity, while our code still interleaves between calls."""

    _lock = threading.Lock()

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name in {"get_paginator"}:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call
