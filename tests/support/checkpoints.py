"""Checkpoint directories written the way Spark writes them, for replication tests without Spark."""

from __future__ import annotations

import os
from pathlib import Path

from scheduler.decisions.checkpoints import cut, last_complete_batch


class Checkpoint:
    """A directory written the way Spark writes a stateful query's checkpoint (two state
    partitions, Hadoop checksums next to each file, a rate source's log)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.batch = -1
        self.tick = 1_700_000_000_000_000_000
        self.put("metadata", '{"id":"7c6e"}')
        self.put("state/0/_metadata/metadata", '{"operatorInfo":{"operatorId":0}}')
        self.put("sources/0/0", "v1\n1795558101271")

    @property
    def url(self) -> str:
        return f"file://{self.path}"

    def put(self, rel: str, text: str) -> None:
        file = self.path / rel
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
        (file.parent / f".{file.name}.crc").write_bytes(b"crc")
        self.tick += 1_000_000
        os.utime(file, ns=(self.tick, self.tick))

    def run(self, batches: int = 1, *, commit: bool = True) -> None:
        for _ in range(batches):
            b = self.batch + 1
            self.put(f"offsets/{b}", f'v1\n{{"batchWatermarkMs":{b}}}\n{b * 5}')
            for p in (0, 1):
                self.put(f"state/0/{p}/{b + 1}.delta", f"delta {b + 1} of partition {p}" * 20)
            if commit:
                self.put(f"commits/{b}", '{"nextBatchWatermarkMs":0}')
                self.batch = b

    def content(self, rel: str) -> bytes:
        return (self.path / rel).read_bytes()


def files(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in path.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def visible_cut(path: Path) -> dict[str, bytes]:
    listing = files(path)
    batch = last_complete_batch(listing)
    assert batch is not None
    return {p: listing[p] for p in cut(listing, batch)}
