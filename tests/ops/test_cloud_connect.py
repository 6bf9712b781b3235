"""connect(): the cloud's implementation, its SDK checked at start and imported only on the first call."""

from __future__ import annotations

import subprocess
import sys

import pytest

from slonk_infra.ops import cloud
from slonk_infra.ops.cloud import CloudCallError, CloudPools, connect


def test_connect_refuses_a_cloud_without_cloud_calls() -> None:
    pools = CloudPools(cloud="local", cluster="c", location="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'local' has no cloud calls; allowed: \['aws', 'gcp'\]"):
        connect(pools)


def test_connect_names_the_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cloud._SDKS, "gcp", ("slonk_no_such_sdk.auth", "google-auth"))
    with pytest.raises(ModuleNotFoundError, match=r"needs google-auth \(pip install 'slonk-infra\[ops\]'\)"):
        connect(CloudPools(cloud="gcp", cluster="c", location="us-central1"))


def test_the_cloud_modules_import_no_sdk_until_a_call() -> None:
    # A fresh interpreter: what importing the package and making both clients loads.
    code = (
        "import sys\n"
        "from slonk_infra.ops.cloud import CloudPools, connect\n"
        "connect(CloudPools(cloud='gcp', cluster='c', location='us-central1'))\n"
        "connect(CloudPools(cloud='aws', cluster='c', location='us-east-1'))\n"
        "heavy = [m for m in ('google.auth.transport.requests', 'boto3', 'botocore') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_cloud_call_error_carries_call_target_and_message() -> None:
    error = CloudCallError("instances.get", "p/z/vm", "404 not found", not_found=True)
    assert str(error) == "instances.get for p/z/vm: 404 not found"
    assert (error.call, error.target, error.message, error.not_found) == (
        "instances.get",
        "p/z/vm",
        "404 not found",
        True,
    )
