"""Log shipping: text per step, masked, sent in batches addressed by character offset.

The run's log is one text. Each batch carries the offset of its first character, so a retried
batch is idempotent (the control plane skips what it already holds). Text is kept in memory
from the last acknowledged offset on, so a 409 `log_gap` is repaired by resending from the
offset the control plane expects.

Text is shipped by whole lines (a partial line waits for its newline, or for a flush), and
masked line by line before it gets an offset, so a secret is never split across two batches.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from firstlume.executor.client import ControlPlaneError, LogGap, Unauthorized
from firstlume.tasks import cancel_and_wait

MASK = "***"


class LogSink(Protocol):
    async def send_logs(self, offset: int, step: str, text: str) -> int: ...


def secret_strings(value: Any) -> list[str]:
    """The strings that reveal a sensitive value when they appear in a log."""
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, int | float):
        return [str(value)]
    found = [json.dumps(value, separators=(",", ":")), json.dumps(value)]
    leaves = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    for leaf in leaves:
        found.extend(secret_strings(leaf))
    return found


class Masker:
    """Replaces every known secret with `***`, longest first."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        variants = {secret, json.dumps(secret)[1:-1]}
        # A multi-line secret (a private key) is also masked line by line, so that no line of it
        # survives wherever the text is cut.
        variants.update(line.strip() for line in secret.splitlines())
        new = {v for v in variants if v.strip()} - self._secrets
        if new:
            self._secrets |= new
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    def mask(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)


@dataclass
class LogText:
    """Text of one step, masked, and where it goes in the run's log: a batch held until the
    control plane has it, or the log's last text handed to the phase's result."""

    offset: int
    step: str
    text: str

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


class LogShipper:
    def __init__(
        self,
        sink: LogSink,
        *,
        offset: int,
        masker: Masker | None = None,
        interval: float = 1.0,
        max_batch_chars: int = 32_000,
    ) -> None:
        self._sink = sink
        self.masker = masker or Masker()
        self._interval = interval
        self._max_batch = max_batch_chars
        self._pending: list[tuple[str, str]] = []  # unmasked (step, text), oldest first
        self._unacked: list[LogText] = []  # masked, contiguous from about `_acked` to `_end`
        self._acked = offset
        self._end = offset
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.unauthorized = False
        self.last_error: ControlPlaneError | None = None

    @property
    def acknowledged_offset(self) -> int:
        return self._acked

    @property
    def pending_chars(self) -> int:
        return sum(len(t) for _, t in self._pending) + (self._end - self._acked)

    def write(self, step: str, text: str) -> None:
        if not text:
            return
        # A program may print binary bytes; the control plane (and PostgreSQL text) refuses NUL,
        # which would stop the log there: it becomes the replacement character.
        text = text.replace("\x00", "\ufffd")
        if self._pending and self._pending[-1][0] == step:
            self._pending[-1] = (step, self._pending[-1][1] + text)
        else:
            self._pending.append((step, text))
        if self.pending_chars >= self._max_batch:
            self._wake.set()

    def line(self, step: str, text: str) -> None:
        self.write(step, text if text.endswith("\n") else text + "\n")

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="log-shipper")

    async def stop(self) -> None:
        """Stops the timer and ships everything; raises if the text cannot be delivered."""
        await self._stop_timer()
        await self.flush()

    async def stop_with_tail(self, max_chars: int | None = None) -> LogText | None:
        """Stops the timer and hands back what is left to ship, for the phase's result to carry
        (`POST /finish` with `log`): one round trip fewer at the end of every phase. Only one
        step's text, and no more than a batch, goes that way; anything else is shipped here and
        None returned, as it is when nothing is left."""
        await self._stop_timer()
        async with self._lock:
            self._seal(final=True)
            if self._unacked and len({b.step for b in self._unacked}) == 1:
                start = max(self._acked, self._unacked[0].offset)
                text = "".join(b.text for b in self._unacked)[start - self._unacked[0].offset :]
                if len(text) <= (max_chars or self._max_batch):
                    return LogText(start, self._unacked[0].step, text) if text else None
        await self.flush()
        return None

    def delivered(self, tail: LogText) -> None:
        """The control plane stored `tail` (the result that carried it was accepted)."""
        self._acknowledge(tail.end)

    async def _stop_timer(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def ship(self) -> None:
        """Ships the complete lines written so far (what the timer does)."""
        await self._ship(final=False)

    async def flush(self) -> None:
        """Ships every written character, partial lines included."""
        await self._ship(final=True)

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=self._interval)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.ship()
            except Unauthorized:
                self.unauthorized = True
                return
            except ControlPlaneError as exc:
                # Kept in memory; the next tick or the final flush sends it again.
                self.last_error = exc
                print(f"firstlume executor: log shipping failed, will retry: {exc}", file=sys.stderr)

    async def _ship(self, *, final: bool) -> None:
        async with self._lock:
            self._seal(final=final)
            while self._unacked:
                batch = self._unacked[0]
                start = max(self._acked, batch.offset)
                text = batch.text[start - batch.offset :]
                if not text:
                    self._unacked.pop(0)
                    continue
                try:
                    next_offset = await self._sink.send_logs(start, batch.step, text)
                except LogGap as gap:
                    if gap.expected_offset >= start:
                        raise  # not a gap we can repair by resending: never loop on it
                    self._rewind(gap.expected_offset)
                    continue
                except Unauthorized:
                    self.unauthorized = True
                    raise
                self._acknowledge(next_offset)

    def _seal(self, *, final: bool) -> None:
        """Moves whole lines (everything when `final`) from pending to masked, offset batches."""
        while self._pending:
            step, text = self._pending[0]
            if len(self._pending) == 1 and not final:
                cut = text.rfind("\n") + 1
                if cut == 0 and len(text) < self._max_batch:
                    return
                if cut == 0:
                    cut = len(text)
                ready, rest = text[:cut], text[cut:]
                if rest:
                    self._pending[0] = (step, rest)
                else:
                    self._pending.pop(0)
            else:
                ready = text
                self._pending.pop(0)
            self._append(step, self.masker.mask(ready))

    def _append(self, step: str, text: str) -> None:
        while text:
            piece = text[: self._max_batch]
            if len(text) > self._max_batch:
                newline = piece.rfind("\n")
                if newline > 0:
                    piece = piece[: newline + 1]
            self._unacked.append(LogText(self._end, step, piece))
            self._end += len(piece)
            text = text[len(piece) :]

    def _acknowledge(self, next_offset: int) -> None:
        if next_offset >= self._end:
            # The control plane holds everything we sent (or more: then new text goes after it).
            self._unacked.clear()
            self._acked = self._end = next_offset
            return
        self._acked = max(self._acked, next_offset)
        while self._unacked and self._unacked[0].end <= self._acked:
            self._unacked.pop(0)

    def _rewind(self, expected: int) -> None:
        first = self._unacked[0].offset if self._unacked else self._end
        if expected >= first:
            self._acked = expected
            return
        # The control plane lost text we thought delivered and no longer hold: continue the
        # log where it ends rather than leave a gap that every later batch would hit.
        shift = first - expected
        for batch in self._unacked:
            batch.offset -= shift
        self._end -= shift
        self._acked = expected
