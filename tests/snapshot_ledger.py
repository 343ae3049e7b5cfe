"""The snapshot ledger protocol over a dict, for snapshot tests that need no session log (the
kernel's real ledger, ``kernel.service.LogLedger``, writes the digests to the log)."""

from __future__ import annotations


class MemoryLedger:
    def __init__(self) -> None:
        self.records: dict[int, str] = {}

    def record(self, generation: int, digest: str) -> None:
        self.records[generation] = digest

    def recorded(self) -> dict[int, str]:
        return dict(self.records)
