"""Node health checks: one program, run at pod start, as Slurm's HealthCheckProgram and in prolog/epilog.

``slonk-health`` (:mod:`slonk_infra.health.cli`) runs small checks (:mod:`slonk_infra.health.checks`),
each returning a :class:`~slonk_infra.health.result.CheckResult` with an action, prints one JSON
:class:`~slonk_infra.health.result.HealthReport` on stdout and one line per failing check on stderr,
and exits with the worst action's code:

=====  ===================================================================
code   meaning
=====  ===================================================================
0      healthy (action ``none``)
2      bad usage or configuration: no check ran, the node is not judged
3      ``restart-pod``
4      ``replace-machine`` (reboot or replace)
5      ``needs-person``
=====  ===================================================================

GPU values come from NVML through ``nvidia-ml-py``; thresholds from a
:class:`~slonk_infra.health.config.HealthSpec` file. With ``--drain`` a failure drains the Slurm
node with a reason starting with :data:`DRAIN_REASON_PREFIX`. The checks run in a child process the run
can abandon (:mod:`slonk_infra.health.isolate`): an NVML call that does not return (a GPU or driver that
has stopped answering) fails its check, and ``--deadline`` ends a run in time for slurmd. Importing this package pulls in no Pulumi SDK, so it runs in the
Slurm image.
"""

from slonk_infra.health.config import HealthSpec
from slonk_infra.health.drain import DRAIN_REASON_PREFIX
from slonk_infra.health.result import EXIT_CODES, CheckResult, HealthReport

__all__ = ["DRAIN_REASON_PREFIX", "EXIT_CODES", "CheckResult", "HealthReport", "HealthSpec"]
