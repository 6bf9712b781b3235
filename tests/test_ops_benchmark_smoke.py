"""benchmarks/sync.py --quick runs to the end, prints its table and keeps the per-tick request counts constant.

No timing is asserted; the request counts are the controller's contract (one list call per kind per tick).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testing.slurmlab import available_flavors, require_flavor

ROOT = Path(__file__).resolve().parents[1]
ROWS = [
    "nodes / pods listed per tick",
    "Slurm requests per steady tick",
    "Kubernetes requests per steady tick",
    "tick wall ms (median)",
    "tick CPU ms, controller (median)",
    "GET nodes ms",
    "reconcile alone ms, every node (no memo)",
    "nodes visited by reconcile per tick",
    "tick CPU ms after one drain or resume (median)",
    "Slurm drain -> cordon s (median / max)",
    "cordon -> Slurm drain s",
]


def test_quick_benchmark(tmp_path: Path) -> None:
    if not available_flavors():
        require_flavor("host")  # fails under CI, skips elsewhere
    out = tmp_path / "sync.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sync.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    labels = [line.split("|")[1].strip() for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert all(r in labels for r in ROWS), labels
    (result,) = json.loads(out.read_text())["results"]
    assert result["listed_nodes"] == result["listed_pods"] == 64
    assert result["slurm_calls"] == {"list_nodes": 1, "list_jobs": 1}
    assert result["kube_calls"] == {"list_nodes": 1, "list_pods": 1}
    assert result["changes"] == 0
    assert result["nodes_visited_changed"] == [1]  # the drained node alone was decided again


def test_decode_benchmark_runs_and_prints_its_table() -> None:
    """benchmarks/decode.py at 64 records: runs as a file from the checkout and prints every row."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "decode.py"), "--nodes", "64", "--samples", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for row in ("| slurm nodes |", "| kubernetes nodes |", "| pods |", "| all three |"):
        assert row in proc.stdout
    assert "| unchanged answer, ms |" in proc.stdout  # the steady tick's path, through the record cache


def test_replace_benchmark_runs_and_calls_the_cloud_once_per_verdict(tmp_path: Path) -> None:
    """benchmarks/ops_replace.py --quick: the verdict -> cloud call path through the real tick, no Slurm needed."""
    out = tmp_path / "replace.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ops_replace.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    labels = [line.split("|")[1].strip() for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert (
        "ticks from verdict to cloud call" in labels and "tick code, verdict -> cloud call ms (median / max)" in labels
    )
    result = json.loads(out.read_text())
    assert result["ticks"] == [2] and result["replace_calls"] == ["reportHostAsFaulty"]
    assert result["calls"].count("replace") == 1  # and no other cloud call: the pool stays at its size
    assert set(result["calls"]) == {"replace"}
    assert result["steady_kube_calls"] == {"list_nodes": 1, "list_pods": 1, "list_statefulsets": 1}
    assert result["steady_cloud_calls"] == {}
