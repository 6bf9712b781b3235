"""The declaration the real-slurmdbd tests apply (testing/slurmlab/dbd.py starts the daemons)."""

from __future__ import annotations

from typing import Any

from testing.slurmlab import MEMBER

SPEC: dict[str, Any] = {
    "qos": [
        {"name": "high", "priority": 100, "preempt": ["low"], "maxGpusPerUser": 8},
        {"name": "low", "maxWall": "2-00:00:00"},
        # A job on the lab's GPU partitions holds a whole node (both GPUs of an l4 node, whatever it asks
        # for), and the limit counts what is held: 2 lets one such job run, not two.
        {"name": "onenode", "maxGpusPerUser": 2},
    ],
    "accounts": [
        {"name": "research", "fairshare": 60, "maxGpus": 16, "users": [MEMBER]},
        {"name": "vision", "parent": "research", "fairshare": 20, "defaultQos": "low", "users": [MEMBER]},
    ],
}
