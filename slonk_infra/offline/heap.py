"""Garbage-collector settings for a program run and for the short-lived processes that make one.

An offline run imports hundreds of provider modules (about 290 for ``pulumi_gcp.compute`` alone) as it
first declares each resource type, and records every registration. All of that lives until the process
ends, yet CPython's collector rescans it on each full collection, and once more while the interpreter
shuts down. On the L-gcp declaration that was about a third of ``slonk-infra render``'s time.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager

FULL_COLLECTION_AFTER = 1000
"""How many second-generation collections a full one waits for inside :func:`few_full_collections`
(CPython's default is 10)."""


@contextmanager
def few_full_collections() -> Iterator[None]:
    """Freeze what is alive now (garbage not yet collected included: it is then never collected) and put
    off full collections until the block ends.

    The young generations are collected as usual, so the cycles a run leaves behind (asyncio tasks and
    futures) are still freed as it goes; only the rescans of the long-lived heap are skipped. The
    thresholds in force before are restored on the way out. Nesting is harmless.
    """
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], max(thresholds[2], FULL_COLLECTION_AFTER))
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def freeze_at_exit() -> None:
    """Freeze the heap when the process exits, before the interpreter's own shutdown collections.

    Those would rescan everything a command built only to drop it (about a second after an L-gcp render).
    Registering again replaces the earlier registration, so a process that runs many commands (a test
    session) freezes once.
    """
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
