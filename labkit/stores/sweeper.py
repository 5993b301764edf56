"""The background sweep of pending claims while a server runs.

Owns: `PendingSweeper`, a thread that every `interval` seconds resolves the pending claims
whose holder is gone (`ClaimHolder.recover`): an attempt of this instance that a store failure
stopped between its claim and its settling (a full disk, a lost connection), a previous
instance that was killed, or a lease past its end. Each is completed if its deletion's receipt
exists and released otherwise, so a claim that nobody will retry (its state expired, its user
gone) neither lingers nor stands between its principal and the next confirmation. A claim
whose holder is alive is never touched. Must not import the core or a transport.

The thread is started by `labkit serve` after the sandbox is applied (Landlock restricts only
threads started after it), and stopped before the stores close.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from labkit.stores import HOLDER, ClaimHolder, StoreError

log = logging.getLogger("labkit.stores.sweeper")

SWEEP_SECONDS: Final = 5.0


class PendingSweeper:
    """Resolves, every `interval` seconds, the pending claims of `notes` and `replay` whose
    holder is gone. A store that fails meanwhile is logged once by the store (`FAULTS`) and
    swept again at the next interval."""

    def __init__(
        self,
        notes: object,
        replay: object,
        *,
        holder: ClaimHolder = HOLDER,
        interval: float = SWEEP_SECONDS,
    ) -> None:
        if not interval > 0:
            raise ValueError("the sweep interval must be positive")
        self.notes = notes
        self.replay = replay
        self.holder = holder
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self) -> int:
        """One sweep now: how many claims it resolved."""
        try:
            return self.holder.recover(self.notes, self.replay)
        except StoreError:
            return 0  # the store logged its condition; the next sweep tries again

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the sweeper runs already")
        self._thread = threading.Thread(target=self._run, name="pending-claims", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sweep()
            except Exception:  # a bug must not end the sweeps for the life of the server
                log.exception("sweep of pending claims failed")
