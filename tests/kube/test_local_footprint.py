"""What the shipped local stack asks of a laptop cluster: the README states it, this keeps it true.

A kind / k3d / minikube node is the Docker VM; a pod whose requests do not fit stays Pending and `pulumi up`
waits on it. Requests are summed the way the scheduler counts a pod: the larger of its containers' sum and
its largest init container.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.kube_support import objects, plan_for

README = Path(__file__).resolve().parents[2] / "README.md"
UNITS = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}


def _mib(value: str | None) -> float:
    if not value:
        return 0.0
    number, unit = re.fullmatch(r"([\d.]+)(Ki|Mi|Gi)?", value).groups()  # type: ignore[union-attr]
    return float(number) * UNITS[unit] if unit else float(number) / 2**20


def _cpu(value: str | None) -> float:
    if not value:
        return 0.0
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def _requests(pod: dict[str, Any]) -> tuple[float, float]:
    def each(containers: list[dict[str, Any]], key: str, conv: Any) -> list[float]:
        return [conv(c.get("resources", {}).get("requests", {}).get(key)) for c in containers]

    main, init = pod.get("containers", []), pod.get("initContainers", [])
    memory = max(sum(each(main, "memory", _mib)), max(each(init, "memory", _mib), default=0.0))
    cpu = max(sum(each(main, "cpu", _cpu)), max(each(init, "cpu", _cpu), default=0.0))
    return memory, cpu


def test_the_local_stack_asks_what_the_readme_says() -> None:
    memory = cpu = 0.0
    for obj in objects(plan_for("local")):
        if obj["kind"] in ("StatefulSet", "Deployment"):
            m, c = _requests(obj["spec"]["template"]["spec"])
            memory += m * obj["spec"].get("replicas", 1)
            cpu += c * obj["spec"].get("replicas", 1)
    stated = re.search(r"The pods ask about (\d+) GiB of memory and (\d+) CPUs", " ".join(README.read_text().split()))
    assert stated, "README no longer states what the local stack asks"
    gib, cpus = int(stated.group(1)), int(stated.group(2))
    assert gib - 1 <= memory / 1024 <= gib + 0.5, f"the local stack asks {memory / 1024:.1f} GiB, README says {gib}"
    assert cpus - 1 <= cpu <= cpus + 0.5, f"the local stack asks {cpu:.2f} CPUs, README says {cpus}"
