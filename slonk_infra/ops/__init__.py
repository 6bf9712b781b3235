"""The operations controller: Slurm <-> Kubernetes state sync, remediation, hardware identity, metrics.

A plain-Python core with thin adapters:

- :mod:`~slonk_infra.ops.model`, :mod:`~slonk_infra.ops.signals`, :mod:`~slonk_infra.ops.sync`,
  :mod:`~slonk_infra.ops.remediation`: records and the pure reconcile step;
- :mod:`~slonk_infra.ops.pools` (pool sizing, scale-in of emptied machines) and
  :mod:`~slonk_infra.ops.replace` (the cloud call of a machine replacement): pure decisions carried
  out through :mod:`~slonk_infra.ops.cloud` (GKE, EKS); :mod:`~slonk_infra.ops.memory` holds all three
  sides in memory for tests and the benchmark;
- :mod:`~slonk_infra.ops.slurm_rest` (slurmrestd, JWT) and :mod:`~slonk_infra.ops.kube_api`
  (the official ``kubernetes`` client): one list call per tick per kind of object;
- :mod:`~slonk_infra.ops.controller` (one tick with I/O), :mod:`~slonk_infra.ops.records` (state
  and the job hardware record), :mod:`~slonk_infra.ops.metrics` (Prometheus);
- :mod:`~slonk_infra.ops.config` (:class:`OperationsSpec`), :mod:`~slonk_infra.kube.operations`
  (:func:`operations_objects`), :mod:`~slonk_infra.ops.main` (the ``slonk-ops`` command).

Importing this package pulls in no Pulumi SDK, so it runs in the cluster image.
"""

from slonk_infra.ops.config import OperationsSpec

__all__ = ["OperationsSpec"]
