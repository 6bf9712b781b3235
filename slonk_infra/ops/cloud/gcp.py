"""The controller's cloud calls on GKE: the Compute Engine and GKE REST APIs, JSON over HTTPS.

The requests go through google-auth's ``AuthorizedSession`` with the pod's credentials (GKE Workload
Identity). Not the google-cloud-compute / google-cloud-container clients: they bring grpc and protobuf
(protobuf>=6 on Python 3.14, where the Pulumi policy SDK pins 5.29), cannot share a process with the
Pulumi SDK ("duplicate symbol 'google.rpc.Status'"), and take seconds of CPU to import, for seven REST
calls whose requests and responses the references below define.

A worker group's GKE node pool is one zonal managed instance group (MIG) per zone of the pool (one
zone in this project); the node pool names its groups in ``instanceGroupUrls`` (the URL names the
instance group; its manager has the same name). A machine's group is its ``created-by`` metadata
item (the MIG's partial URL), read with ``instances.get``.

Requests (Compute Engine v1 REST reference, https://cloud.google.com/compute/docs/reference/rest/v1):

- pool_size: ``GET container/v1/projects/P/locations/L/clusters/C/nodePools/N``, then per group
  ``GET compute/v1/projects/P/zones/Z/instanceGroupManagers/G`` -> ``targetSize`` (summed).
- grow: the same, then ``POST .../instanceGroupManagers/G/resize?size=S`` (only when S is above the
  target: a resize down would delete machines the group picks, the very thing this controller avoids).
- pool_change: ``GET container/v1/.../nodePools/N`` -> ``status`` must be ``RUNNING`` (RECONCILING
  while "some work is actively being done on the node pool, such as upgrading node software",
  https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools#Status),
  then per group ``GET .../instanceGroupManagers/G`` -> ``status.isStable`` must be true ("none of the
  instances in the managed instance group is currently undergoing any type of change (for example,
  creation, restart, or deletion); no future changes are scheduled ...; and the managed instance group
  itself is not being modified",
  https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers#InstanceGroupManagerStatus).
  A surge upgrade, an auto-repair or a label/taint change recreates machines through the group; a
  ``deleteInstances`` then would race it. The node pool read also refreshes the cached groups (a
  blue-green upgrade adds a group).
- remove: ``GET .../instances/I`` -> ``created-by``; ``POST .../instanceGroupManagers/G/deleteInstances``
  with ``{"instances": [selfLink], "skipInstancesOnValidationError": false}``: the group deletes that
  machine and lowers its target size by one ("This method reduces the targetSize of the managed
  instance group by the number of instances that you delete").
- replace: ``POST .../instances/I/reportHostAsFaulty`` with ``{"disruptionSchedule": "IMMEDIATE",
  "faultReasons": [{"behavior": "UNRECOVERABLE_GPU_ERROR", ...}]}`` for a faulty host (reservation-bound
  A3/A4 machines only: https://docs.cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host);
  else ``GET .../instances/I`` and ``POST .../instanceGroupManagers/G/recreateInstances``.

Mutating calls return the Compute Engine Operation as soon as it is scheduled; this module does not wait
for it (the controller sees the outcome on a later tick). An Operation already carrying an error fails
the call. An HTTP error status fails the call with the API's own message (``error.message`` of the
documented error body); a 404 is ``not_found``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slonk_infra.ops.cloud.machines import TIMEOUT_SECONDS, CloudCallError, CloudPools, MachineRef, ReplaceCall

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

COMPUTE_ENDPOINT = "https://compute.googleapis.com"
CONTAINER_ENDPOINT = "https://container.googleapis.com"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
"""The OAuth scope every method used here accepts (each method reference's "Authorization scopes")."""

CREATED_BY = "created-by"
"""The instance metadata item a managed instance group sets to its own partial URL
(https://cloud.google.com/compute/docs/instance-groups/getting-info-about-migs#checking_if_a_vm_is_part_of_a_mig)."""

# instances.reportHostAsFaulty body values (Compute Engine REST reference, InstancesReportHostAsFaultyRequest;
# https://cloud.google.com/sdk/gcloud/reference/compute/instances/report-host-as-faulty): the only schedule
# the API accepts is IMMEDIATE; the behaviour a failed GPU health check stands for is UNRECOVERABLE_GPU_ERROR.
DISRUPTION_SCHEDULE = "IMMEDIATE"
FAULT_BEHAVIOR = "UNRECOVERABLE_GPU_ERROR"
FAULT_DESCRIPTION = "slonk-ops: replace-machine verdict (GPU health check failed)"

NODE_POOL_STABLE = "RUNNING"
"""The node pool status in which the controller grows the pool or removes a machine of it (NodePool.Status:
PROVISIONING, RUNNING, RUNNING_WITH_ERROR, RECONCILING, STOPPING, ERROR; the reference in the module
docstring). RUNNING_WITH_ERROR and ERROR hold too: the decision names the status and its message."""

# instanceGroupManagers currentActions counts named in the "not stable" decision (InstanceGroupManagerActionsSummary, JSON
# keys in camelCase,
# https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers#InstanceGroupManagerActionsSummary).
MIG_ACTIONS = (
    "abandoning",
    "creating",
    "creating_without_retries",
    "deleting",
    "recreating",
    "refreshing",
    "restarting",
    "resuming",
    "starting",
    "stopping",
    "suspending",
    "verifying",
)

# projects/P/zones/Z/instanceGroupManagers/G, full URL or partial; GKE's instanceGroupUrls name
# .../instanceGroupManagers/G (older responses .../instanceGroups/G: the manager has the same name).
_GROUP_URL = re.compile(r"projects/([^/]+)/zones/([^/]+)/instanceGroup(?:Manager)?s/([^/?#]+)")


@dataclass(frozen=True)
class Group:
    """One zonal managed instance group (GKE names it ``gke-<cluster>-<pool>-<hash>-grp``)."""

    project: str
    zone: str
    name: str


def group_of_url(url: str) -> Group | None:
    """The zonal group a node pool's instance group URL or an instance's ``created-by`` names (None for
    a regional group or anything else)."""
    match = _GROUP_URL.search(url)
    return Group(*match.groups()) if match else None


@dataclass(frozen=True)
class GcpClients:
    """An authorized HTTP session, the two APIs' base URLs and the project the credentials belong to."""

    session: Any
    """A ``google.auth.transport.requests.AuthorizedSession`` (a ``requests.Session`` that adds the token)."""
    compute: str
    """Compute Engine v1 base URL (``https://compute.googleapis.com/compute/v1``)."""
    container: str
    """GKE v1 base URL (``https://container.googleapis.com/v1``)."""
    project: str

    def call(
        self, method: str, url: str, timeout: float, *, params: dict[str, Any] | None = None, body: Any = None
    ) -> Any:
        """One request; the JSON answer, or :class:`_HttpError` for an error status."""
        response = self.session.request(method, url, params=params, json=body, timeout=timeout)
        data = response.json() if response.content else {}
        if response.status_code >= 400:
            error = data.get("error", {}) if isinstance(data, dict) else {}
            message = error.get("message") if isinstance(error, dict) else None
            raise _HttpError(response.status_code, str(message or response.reason or "error"))
        return data


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}")
        self.status = status


def make_clients(
    credentials: Credentials | None = None,
    project: str = "",
    *,
    compute_endpoint: str | None = None,
    container_endpoint: str | None = None,
) -> GcpClients:
    """A session with ``credentials`` (default: ``google.auth.default()``, which is GKE Workload Identity in
    the pod) and ``project`` (default: the credentials' project). An endpoint (e.g. ``http://127.0.0.1:8080``
    for a test server, or a Private Service Connect name) replaces the public one."""
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    if credentials is None:
        credentials, found = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
        project = project or (found or "")
    return GcpClients(
        session=AuthorizedSession(credentials),  # type: ignore[no-untyped-call]
        compute=f"{(compute_endpoint or COMPUTE_ENDPOINT).rstrip('/')}/compute/v1",
        container=f"{(container_endpoint or CONTAINER_ENDPOINT).rstrip('/')}/v1",
        project=project,
    )


class GcpMachines:
    """:class:`~slonk_infra.ops.cloud.CloudMachines` on GKE. ``clients`` default to :func:`make_clients`
    (made on the first call, so a controller starts even while its identity is being set up)."""

    def __init__(
        self,
        pools: CloudPools,
        clients: GcpClients | Callable[[], GcpClients] | None = None,
        *,
        timeout: float = TIMEOUT_SECONDS,
    ) -> None:
        if pools.cloud != "gcp":
            raise ValueError(f"GcpMachines: pools.cloud is {pools.cloud!r}, expected 'gcp'")
        self.pools = pools
        self.timeout = timeout
        self._clients = clients if isinstance(clients, GcpClients) else None
        self._factory: Callable[[], GcpClients] = clients if callable(clients) else make_clients
        # node pool -> its groups: fixed for the pool's life, except during a blue-green upgrade; dropped
        # whenever a call on them fails, so the next tick reads the node pool again.
        self._groups: dict[str, list[Group]] = {}

    # ------------------------------------------------------------------ plumbing
    @property
    def clients(self) -> GcpClients:
        """The clients, made on first use; no credentials or no project is a :class:`CloudCallError`."""
        if self._clients is None:
            with self._calling("google.auth.default", "the pod's Google credentials"):
                self._clients = self._factory()
        if not self._clients.project:
            raise CloudCallError(
                "google.auth.default",
                "the pod's Google credentials",
                "the credentials name no project (set GOOGLE_CLOUD_PROJECT to the cluster's project)",
            )
        return self._clients

    def _get(self, url: str) -> Any:
        # No retries inside (the controller's next tick is the retry); a timeout on every request.
        return self.clients.call("GET", url, self.timeout)

    def _post(self, url: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        return self.clients.call("POST", url, self.timeout, params=params, body=body)

    def _compute(self, project: str, zone: str, path: str) -> str:
        return f"{self.clients.compute}/projects/{project}/zones/{zone}/{path}"

    @contextmanager
    def _calling(self, call: str, target: str, pool: str | None = None) -> Iterator[None]:
        try:
            yield
        except CloudCallError:
            if pool is not None:
                self._groups.pop(pool, None)
            raise
        except Exception as exc:  # HTTP error statuses, auth and transport (requests) errors alike
            if pool is not None:
                self._groups.pop(pool, None)
            raise CloudCallError(call, target, _message(exc), not_found=_is_not_found(exc)) from exc

    def _checked(self, call: str, target: str, operation: Any) -> None:
        """A scheduled Operation that already failed (e.g. deleteInstances of a machine not in the group)."""
        errors = operation.get("error", {}).get("errors", []) if isinstance(operation, dict) else []
        found = [f"{e.get('code', '')}: {e.get('message', '')}" for e in errors]
        if found:
            raise CloudCallError(call, target, "; ".join(found), not_found=any("NOT_FOUND" in e for e in found))

    # ------------------------------------------------------------------ pools
    def node_pool(self, pool: str) -> str:
        """The node pool's resource name ``projects/P/locations/L/clusters/C/nodePools/N``."""
        name = self.pools.node_pools.get(pool)
        if not name:
            raise CloudCallError(
                "nodePools.get",
                pool,
                f"no node pool is configured for worker group {pool!r} (cloud.nodePools: {sorted(self.pools.node_pools)})",
            )
        return (
            f"projects/{self.clients.project}/locations/{self.pools.location}"
            f"/clusters/{self.pools.cluster}/nodePools/{name}"
        )

    def _read_node_pool(self, pool: str) -> tuple[dict[str, Any], list[Group]]:
        """The node pool (``nodePools.get``) and its managed instance groups, which are cached."""
        name = self.node_pool(pool)
        with self._calling("nodePools.get", name):
            found = self._get(f"{self.clients.container}/{name}")
        urls = [str(u) for u in found.get("instanceGroupUrls", [])]
        groups = [g for g in (group_of_url(u) for u in urls) if g is not None]
        if not groups:
            raise CloudCallError("nodePools.get", name, f"no zonal instance group in {urls}")
        self._groups[pool] = groups
        return found, groups

    def groups(self, pool: str) -> list[Group]:
        """The managed instance groups of a worker group's node pool (``nodePools.get``, then cached)."""
        if pool in self._groups:
            return self._groups[pool]
        return self._read_node_pool(pool)[1]

    def _manager(self, pool: str, group: Group) -> dict[str, Any]:
        with self._calling("instanceGroupManagers.get", f"{group.zone}/{group.name}", pool):
            found: dict[str, Any] = self._get(
                self._compute(group.project, group.zone, f"instanceGroupManagers/{group.name}")
            )
        return found

    def _target_size(self, pool: str, group: Group) -> int:
        return int(self._manager(pool, group).get("targetSize", 0))

    def pool_size(self, pool: str) -> int:
        return sum(self._target_size(pool, g) for g in self.groups(pool))

    def pool_ready(self, pool: str) -> bool:
        # A GKE pool's machines come from its MIG whenever capacity allows; no reservation state to wait for.
        return True

    def pool_change(self, pool: str) -> str:
        found, groups = self._read_node_pool(pool)  # always fresh: its status is the point
        status = str(found.get("status", ""))
        if status != NODE_POOL_STABLE:
            message = f": {found['statusMessage']}" if found.get("statusMessage") else ""
            return f"node pool {self.pools.node_pools[pool]} is {status or 'of no status'}{message}"
        for group in groups:
            manager = self._manager(pool, group)
            if not manager.get("status", {}).get("isStable", False):
                actions = manager.get("currentActions", {})
                busy = [f"{a} {actions[_camel(a)]}" for a in MIG_ACTIONS if actions.get(_camel(a))]
                doing = f" ({', '.join(busy)})" if busy else ""
                return f"instance group {group.zone}/{group.name} is not stable{doing}"
        return ""

    def grow(self, pool: str, size: int) -> None:
        groups = self.groups(pool)
        if len(groups) != 1:
            names = ", ".join(f"{g.zone}/{g.name}" for g in groups)
            raise CloudCallError(
                "instanceGroupManagers.resize",
                pool,
                f"the node pool has {len(groups)} instance groups ({names}); only a single-zone pool is grown "
                "(a blue-green upgrade in progress also shows two)",
            )
        group = groups[0]
        if size <= self._target_size(pool, group):
            return  # never a resize down: the group would pick which machines to delete
        target = f"{group.zone}/{group.name}"
        with self._calling("instanceGroupManagers.resize", target, pool):
            # "size" is a query parameter; the request body is empty (instanceGroupManagers.resize reference).
            operation = self._post(
                self._compute(group.project, group.zone, f"instanceGroupManagers/{group.name}/resize"),
                params={"size": size},
            )
        self._checked("instanceGroupManagers.resize", target, operation)

    # ------------------------------------------------------------------ machines
    def _instance(self, call: str, machine: MachineRef) -> tuple[str, Group]:
        """The machine's self link and its group (``instances.get`` -> metadata ``created-by``)."""
        target = _name(machine)
        with self._calling("instances.get", target):
            instance = self._get(self._compute(machine.project, machine.zone, f"instances/{machine.instance}"))
        items = instance.get("metadata", {}).get("items", [])
        created_by = next((str(i.get("value", "")) for i in items if i.get("key") == CREATED_BY), "")
        group = group_of_url(created_by)
        if group is None:
            raise CloudCallError(
                call, target, f"the machine is in no zonal managed instance group (metadata created-by: {created_by!r})"
            )
        # The path's project: the machine's own (the created-by item names the project by number).
        group = Group(project=machine.project, zone=group.zone, name=group.name)
        link = str(instance.get("selfLink") or f"zones/{machine.zone}/instances/{machine.instance}")
        return link, group

    def remove(self, machine: MachineRef) -> None:
        call = "instanceGroupManagers.deleteInstances"
        link, group = self._instance(call, machine)
        body = {"instances": [link], "skipInstancesOnValidationError": False}
        with self._calling(call, _name(machine)):
            operation = self._post(
                self._compute(group.project, group.zone, f"instanceGroupManagers/{group.name}/deleteInstances"), body
            )
        self._checked(call, _name(machine), operation)

    def replace(self, machine: MachineRef, faulty_host: bool) -> ReplaceCall:
        if faulty_host:
            call = "instances.reportHostAsFaulty"
            report = {
                "disruptionSchedule": DISRUPTION_SCHEDULE,
                "faultReasons": [{"behavior": FAULT_BEHAVIOR, "description": FAULT_DESCRIPTION}],
            }
            with self._calling(call, _name(machine)):
                operation = self._post(
                    self._compute(machine.project, machine.zone, f"instances/{machine.instance}/reportHostAsFaulty"),
                    report,
                )
            self._checked(call, _name(machine), operation)
            return "reportHostAsFaulty"
        call = "instanceGroupManagers.recreateInstances"
        link, group = self._instance(call, machine)
        with self._calling(call, _name(machine)):
            operation = self._post(
                self._compute(group.project, group.zone, f"instanceGroupManagers/{group.name}/recreateInstances"),
                {"instances": [link]},
            )
        self._checked(call, _name(machine), operation)
        return "recreateInstances"


def _camel(snake: str) -> str:
    """The JSON spelling of a field (``creating_without_retries`` -> ``creatingWithoutRetries``)."""
    head, *rest = snake.split("_")
    return head + "".join(w.title() for w in rest)


def _name(machine: MachineRef) -> str:
    return f"{machine.project}/{machine.zone}/{machine.instance}"


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, _HttpError) and exc.status == 404
