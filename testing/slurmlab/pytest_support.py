"""pytest glue: a missing flavor fails under CI and skips locally."""

from __future__ import annotations

import os

from .lab import Flavor, available_flavors, missing_reason


def require_flavor(flavor: Flavor) -> None:
    """Fails the test (CI=true) or skips it (otherwise) when ``flavor`` is not installed."""
    import pytest

    if flavor in available_flavors():
        return
    reason = missing_reason(flavor)
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)
