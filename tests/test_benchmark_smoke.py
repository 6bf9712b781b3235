"""benchmarks/run.py --quick runs to the end and prints the table it promises (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUICK_ROWS = {"S", "nodes-gcp-2", "nodes-gcp-8", "pools-gcp-1", "pools-gcp-2"}
REQUIRED_COLUMNS = [
    "declaration",
    "cloud",
    "Slurm nodes",
    "validate ms",
    "Slurm files ms",
    "program s",
    "peak RSS Δ MiB",
    "resources",
    "depth d+p",
    "floor s",
    "program/floor",
    "end-to-end s",
]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_quick_benchmark_prints_the_table_and_a_flat_node_sweep(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard, not a timing assertion
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"

    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| declaration |"))
    header = cells(lines[start])
    assert [c for c in REQUIRED_COLUMNS if c not in header] == []
    body = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        body.append(cells(line))
    assert {r[0] for r in body} == QUICK_ROWS
    assert all(len(r) == len(header) for r in body)
    column = {name: i for i, name in enumerate(header)}
    for r in body:
        assert float(r[column["program s"]]) > 0
        assert int(r[column["resources"]]) > 0
    assert next(r for r in body if r[0] == "S")[column["end-to-end s"]] != "-"
    assert "## Targets" in proc.stdout

    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    cases = {c["name"]: c for c in data["cases"]}
    assert set(cases) == QUICK_ROWS
    node_sweep = [c for c in data["cases"] if c["kind"] == "node sweep"]
    assert len(node_sweep) >= 2
    assert len({c["slurm_nodes"] for c in node_sweep}) == len(node_sweep)  # the sweep does change node count
    assert len({c["resources"] for c in node_sweep}) == 1, [(c["name"], c["resources"]) for c in node_sweep]
    assert len({json.dumps(c["by_type"], sort_keys=True) for c in node_sweep}) == 1
    pools = sorted((c for c in data["cases"] if c["kind"] == "pool sweep"), key=lambda c: c["pools"])
    assert pools[0]["resources"] < pools[-1]["resources"]
    assert data["resource_model"]["gcp"]["constant_in_nodes"] is True
