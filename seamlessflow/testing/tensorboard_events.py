"""Reads TensorBoard event files back (TFRecord framing: length, crc, Event proto, crc) for the tests."""

from __future__ import annotations

import struct
from pathlib import Path

from tensorboardX.proto.event_pb2 import Event


def scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} over every event file under `logdir`; a record still being written (a
    writer open on the file) is left for the next read."""
    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(Path(logdir).rglob("events.out.tfevents.*")):
        data = path.read_bytes()
        at = 0
        while at + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, at)
            if at + 12 + length + 4 > len(data):
                break
            event = Event.FromString(data[at + 12: at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out
