"""slonk-ops' collector settings: what survives the first tick is frozen, young passes made rarer."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from slonk_infra.ops import main


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_gc")
def test_settle_heap_freezes_the_survivors_and_frees_cycles_among_frozen_objects() -> None:
    main.settle_heap()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == main.GC_THRESHOLDS

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle, frozen below, then dropped
    alive = weakref.ref(a)
    main.settle_heap()
    del a, b
    gc.collect()
    assert alive() is not None  # out of sight of ordinary collections
    main.settle_heap()  # the periodic settle collects it
    assert alive() is None
