"""Garbage-collector settings of a program run: full collections put off, thresholds restored after."""

from __future__ import annotations

import atexit
import gc

import pytest

from slonk_infra.offline.heap import FULL_COLLECTION_AFTER, few_full_collections, freeze_at_exit


def test_full_collections_are_put_off_inside_and_the_thresholds_restored_after() -> None:
    before = gc.get_threshold()
    with few_full_collections():
        assert gc.get_threshold() == (before[0], before[1], max(before[2], FULL_COLLECTION_AFTER))
        with few_full_collections():
            pass
        assert gc.get_threshold()[2] == max(before[2], FULL_COLLECTION_AFTER)
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), few_full_collections():
        raise RuntimeError("a failed run")
    assert gc.get_threshold() == before


def test_the_exit_freeze_is_registered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[object] = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(atexit, "unregister", lambda fn: registered.remove(fn) if fn in registered else None)
    freeze_at_exit()
    freeze_at_exit()
    assert registered == [gc.freeze]
