"""Reading a file a user names (a report, a paste, a --matrix file): never more than a cap.

``/dev/zero``, a FIFO that never ends or a multi-gigabyte file must be one clear error, not a
process that reads until memory runs out; every reader of user files goes through here."""

from __future__ import annotations

from typing import BinaryIO, Union


class TooLarge(ValueError):
    """The input holds more than the cap; ``limit`` says how much was allowed."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"larger than {limit // (1024 * 1024)} MiB")
        self.limit = limit


def read_capped(source: Union[str, BinaryIO], limit: int) -> bytes:
    """All of ``source`` (a path, or an open binary stream such as standard input) if it holds at most
    ``limit`` bytes; TooLarge if more (only ``limit`` + 1 bytes are read); OSError as raised."""
    if isinstance(source, str):
        with open(source, "rb") as fh:
            data = fh.read(limit + 1)
    else:
        data = source.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(limit)
    return data
