"""``--checkpoint FILE``: a walk's position kept on disk, so a killed walk continues.

The file is replaced atomically (a temporary file, fsync, ``os.replace``) after each item is
written out and flushed, so whatever kills the process, FILE holds a whole checkpoint of an
item already written: nothing is lost, and at most the item in flight is written twice.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._args import UsageError

__all__ = ["CheckpointFile", "CheckpointWriteError"]

#: A checkpoint is a few hundred bytes; anything much larger is not one of ours.
_MAX_BYTES = 1 << 20


class CheckpointWriteError(Exception):
    """The checkpoint could not be saved mid-walk (a full disk): one line on stderr, exit 1."""


class CheckpointFile:
    """The checkpoint of one walk, in ``path``."""

    def __init__(self, path: str) -> None:
        if not path:
            raise UsageError("--checkpoint FILE: the name is empty")
        self.path = Path(path)
        self._temporary = self.path.with_name(f".{self.path.name}.tmp")

    def load(self) -> str | None:
        """The saved checkpoint's text, or None when there is none (a fresh walk)."""
        try:
            with self.path.open("rb") as file:
                data = file.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise UsageError(f"--checkpoint {self.path}: cannot read it: {exc.strerror}") from None
        if len(data) > _MAX_BYTES:
            raise UsageError(f"--checkpoint {self.path}: not a checkpoint (over 1 MiB)")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(
                f"--checkpoint {self.path}: not a checkpoint (not UTF-8 text)"
            ) from None

    def check_writable(self) -> None:
        """Fail before the walk starts when the checkpoint could not be written."""
        try:
            self._write(self._temporary, "")
            self._temporary.unlink()
        except OSError as exc:
            raise UsageError(f"--checkpoint {self.path}: cannot write it: {exc.strerror}") from None

    def save(self, text: str) -> None:
        """Replace the checkpoint with ``text``, atomically and durably.

        On failure FILE still holds the previous checkpoint, of an item already written.
        """
        try:
            self._write(self._temporary, text)
            os.replace(self._temporary, self.path)
        except OSError as exc:
            self._temporary.unlink(missing_ok=True)
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise CheckpointWriteError(f"--checkpoint {self.path}: {reason}") from None

    def remove(self) -> None:
        """The walk completed: no checkpoint is left behind."""
        self.path.unlink(missing_ok=True)
        self._temporary.unlink(missing_ok=True)

    @staticmethod
    def _write(path: Path, text: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
