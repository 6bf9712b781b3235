"""Names shared by the catalog modules: clouds, pool kinds and GPU fabrics."""

from __future__ import annotations

from typing import Literal

Cloud = Literal["gcp", "aws", "local"]
PoolKind = Literal["gpu", "tpu", "cpu"]
FabricName = Literal["gpudirect-tcpx", "gpudirect-tcpxo", "gpudirect-rdma", "efa"]
CLOUDS: tuple[Cloud, ...] = ("gcp", "aws", "local")
