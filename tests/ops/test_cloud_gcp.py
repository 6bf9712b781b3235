"""The GKE cloud calls, against a local HTTP server that answers with the documented REST responses
(tests/data/cloud/gcp/*.json, each with its source).

The calls go through google-auth's AuthorizedSession, as in the pod; only the endpoint is moved to the test
server. Every test asserts the exact HTTP method, path, query and JSON body the Compute Engine / GKE REST
references give:
https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/{get,resize,deleteInstances,recreateInstances},
https://cloud.google.com/compute/docs/reference/rest/v1/instances/{get,reportHostAsFaulty},
https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools/get.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from google.auth.credentials import AnonymousCredentials

from slonk_infra.ops.cloud import TIMEOUT_SECONDS, CloudCallError, CloudPools, connect, machine_of
from slonk_infra.ops.cloud.gcp import (
    GcpClients,
    GcpMachines,
    Group,
    group_of_url,
    make_clients,
)

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data" / "cloud" / "gcp"

PROJECT = "proj"
ZONE = "us-central1-a"
GROUP = "gke-slonk-slonk-gpu-a3-1a2b3c4d-grp"
GROUP2 = "gke-slonk-slonk-gpu-a3-9f8e7d6c-grp"
INSTANCE = "gke-slonk-slonk-gpu-a3-1a2b3c4d-x7k2"
SELF_LINK = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{INSTANCE}"

NODE_POOL_PATH = f"/v1/projects/{PROJECT}/locations/us-central1/clusters/slonk/nodePools/slonk-gpu-a3"
IGM_PATH = f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/instanceGroupManagers/{GROUP}"
IGM2_PATH = f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/instanceGroupManagers/{GROUP2}"
INSTANCE_PATH = f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{INSTANCE}"

POOLS = CloudPools(cloud="gcp", cluster="slonk", location="us-central1", node_pools={"gpu": "slonk-gpu-a3"})
MACHINE = machine_of(f"gce://{PROJECT}/{ZONE}/{INSTANCE}")


def reply(recording: str, /, **changes: Any) -> tuple[int, dict[str, Any]]:
    """A recorded response: (HTTP status, JSON body), with top-level fields changed."""
    doc = json.loads((DATA / f"{recording}.json").read_text(encoding="utf-8"))
    return int(doc.get("status", 200)), {**doc["response"], **changes}


@dataclass(frozen=True)
class Seen:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


class FakeGoogle:
    """An HTTP server answering (method, path) from a table; records every request in order."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        self.seen: list[Seen] = []
        self.delay = 0.0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                fake.seen.append(Seen(self.command, url.path, parse_qs(url.query), json.loads(raw) if raw else None))
                time.sleep(fake.delay)
                status, body = fake.routes.get((self.command, url.path), reply("not_found"))
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (the timeout test)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def calls(self) -> list[tuple[str, str]]:
        return [(s.method, s.path) for s in self.seen]


@pytest.fixture
def google() -> Iterator[FakeGoogle]:
    fake = FakeGoogle()
    fake.routes = {
        ("GET", NODE_POOL_PATH): reply("node_pool"),
        ("GET", IGM_PATH): reply("instance_group_manager"),
        ("GET", IGM2_PATH): reply("instance_group_manager", name=GROUP2, targetSize=3),
        ("GET", INSTANCE_PATH): reply("instance"),
        ("POST", f"{IGM_PATH}/resize"): reply("operation", operationType="compute.instanceGroupManagers.resize"),
        ("POST", f"{IGM_PATH}/deleteInstances"): reply("operation"),
        ("POST", f"{IGM_PATH}/recreateInstances"): reply(
            "operation", operationType="compute.instanceGroupManagers.recreateInstances"
        ),
        ("POST", f"{INSTANCE_PATH}/reportHostAsFaulty"): reply(
            "operation", operationType="compute.instances.reportHostAsFaulty"
        ),
    }
    yield fake
    fake.close()


def machines(fake: FakeGoogle, timeout: float = TIMEOUT_SECONDS) -> GcpMachines:
    credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
    clients = make_clients(credentials, PROJECT, compute_endpoint=fake.url, container_endpoint=fake.url)
    return GcpMachines(POOLS, clients, timeout=timeout)


def test_pool_size_reads_the_node_pool_then_its_group_target_size(google: FakeGoogle) -> None:
    gcp = machines(google)
    assert gcp.pool_size("gpu") == 2
    assert google.calls() == [("GET", NODE_POOL_PATH), ("GET", IGM_PATH)]
    assert all(s.body is None for s in google.seen)
    # The node pool's groups are read once; the target size every time.
    google.routes[("GET", IGM_PATH)] = reply("instance_group_manager", targetSize=4)
    assert gcp.pool_size("gpu") == 4
    assert google.calls()[2:] == [("GET", IGM_PATH)]


def test_pool_size_sums_the_groups_of_a_pool_and_grow_refuses_more_than_one(google: FakeGoogle) -> None:
    google.routes[("GET", NODE_POOL_PATH)] = reply("node_pool_blue_green")
    gcp = machines(google)
    assert gcp.pool_size("gpu") == 5
    with pytest.raises(CloudCallError, match=r"2 instance groups") as info:
        gcp.grow("gpu", 9)
    assert info.value.call == "instanceGroupManagers.resize"
    assert not [c for c in google.calls() if c[0] == "POST"]


def test_grow_resizes_the_group_to_the_new_size(google: FakeGoogle) -> None:
    machines(google).grow("gpu", 5)
    assert google.calls() == [("GET", NODE_POOL_PATH), ("GET", IGM_PATH), ("POST", f"{IGM_PATH}/resize")]
    resize = google.seen[-1]
    # instanceGroupManagers.resize: "size" is a query parameter; the request body is empty.
    assert resize.query["size"] == ["5"]
    assert resize.body is None


@pytest.mark.parametrize("size", [1, 2])
def test_grow_never_resizes_down_or_to_the_same_size(google: FakeGoogle, size: int) -> None:
    machines(google).grow("gpu", size)
    assert google.calls() == [("GET", NODE_POOL_PATH), ("GET", IGM_PATH)]


def test_remove_deletes_exactly_that_instance_from_its_created_by_group(google: FakeGoogle) -> None:
    assert MACHINE is not None
    machines(google).remove(MACHINE)
    assert google.calls() == [("GET", INSTANCE_PATH), ("POST", f"{IGM_PATH}/deleteInstances")]
    # The created-by item names the project by number; the request keeps the machine's project id.
    assert google.seen[-1].body == {"instances": [SELF_LINK], "skipInstancesOnValidationError": False}


def test_remove_of_a_machine_in_no_group_deletes_nothing(google: FakeGoogle) -> None:
    assert MACHINE is not None
    google.routes[("GET", INSTANCE_PATH)] = reply("instance_standalone")
    with pytest.raises(CloudCallError, match="no zonal managed instance group") as info:
        machines(google).remove(MACHINE)
    assert info.value.call == "instanceGroupManagers.deleteInstances"
    assert google.calls() == [("GET", INSTANCE_PATH)]


def test_remove_of_a_machine_already_gone_says_not_found(google: FakeGoogle) -> None:
    assert MACHINE is not None
    del google.routes[("GET", INSTANCE_PATH)]
    with pytest.raises(CloudCallError) as info:
        machines(google).remove(MACHINE)
    error = info.value
    assert (error.call, error.not_found) == ("instances.get", True)
    assert error.target == f"{PROJECT}/{ZONE}/{INSTANCE}"
    assert "was not found" in error.message and "404" in error.message


def test_an_operation_that_already_failed_fails_the_call(google: FakeGoogle) -> None:
    assert MACHINE is not None
    google.routes[("POST", f"{IGM_PATH}/deleteInstances")] = reply("operation_failed")
    with pytest.raises(CloudCallError, match="is not a member of the group") as info:
        machines(google).remove(MACHINE)
    assert info.value.call == "instanceGroupManagers.deleteInstances"
    assert info.value.not_found


def test_replace_reports_a_faulty_host_with_the_documented_body(google: FakeGoogle) -> None:
    assert MACHINE is not None
    assert machines(google).replace(MACHINE, faulty_host=True) == "reportHostAsFaulty"
    assert google.calls() == [("POST", f"{INSTANCE_PATH}/reportHostAsFaulty")]
    body = google.seen[0].body
    assert body["disruptionSchedule"] == "IMMEDIATE"
    assert [r["behavior"] for r in body["faultReasons"]] == ["UNRECOVERABLE_GPU_ERROR"]
    assert body["faultReasons"][0]["description"]


def test_replace_without_faulty_host_recreates_the_instance_in_its_group(google: FakeGoogle) -> None:
    assert MACHINE is not None
    assert machines(google).replace(MACHINE, faulty_host=False) == "recreateInstances"
    assert google.calls() == [("GET", INSTANCE_PATH), ("POST", f"{IGM_PATH}/recreateInstances")]
    assert google.seen[-1].body == {"instances": [SELF_LINK]}


def test_a_server_error_is_one_request_and_one_error_type(google: FakeGoogle) -> None:
    google.routes[("GET", IGM_PATH)] = reply("unavailable")
    gcp = machines(google)
    with pytest.raises(CloudCallError, match="503") as info:
        gcp.pool_size("gpu")
    assert info.value.call == "instanceGroupManagers.get" and not info.value.not_found
    assert google.calls() == [("GET", NODE_POOL_PATH), ("GET", IGM_PATH)]  # no retry inside
    # A failed group call forgets the pool's groups: the next tick reads the node pool again.
    google.routes[("GET", IGM_PATH)] = reply("instance_group_manager")
    assert gcp.pool_size("gpu") == 2
    assert google.calls()[2:] == [("GET", NODE_POOL_PATH), ("GET", IGM_PATH)]


def test_every_request_has_a_timeout(google: FakeGoogle) -> None:
    google.delay = 2.0
    start = time.monotonic()
    with pytest.raises(CloudCallError) as info:
        machines(google, timeout=0.3).pool_size("gpu")
    assert time.monotonic() - start < 1.5
    assert info.value.call == "nodePools.get"
    assert len(google.seen) == 1


def test_a_worker_group_without_a_node_pool_is_a_clear_error(google: FakeGoogle) -> None:
    with pytest.raises(CloudCallError, match=r"no node pool is configured for worker group 'tpu'.*\['gpu'\]"):
        machines(google).pool_size("tpu")
    assert google.seen == []


def test_pool_ready_is_always_true_without_a_call(google: FakeGoogle) -> None:
    assert machines(google).pool_ready("gpu") is True
    assert google.seen == []


def test_pool_change_is_empty_for_a_running_pool_of_stable_groups(google: FakeGoogle) -> None:
    gcp = machines(google)
    assert gcp.pool_change("gpu") == ""
    assert google.calls() == [("GET", NODE_POOL_PATH), ("GET", IGM_PATH)]
    # Always read afresh (the status is the point), never from the cached groups.
    assert gcp.pool_change("gpu") == ""
    assert google.calls()[2:] == [("GET", NODE_POOL_PATH), ("GET", IGM_PATH)]


def test_pool_change_names_a_reconciling_node_pool(google: FakeGoogle) -> None:
    # nodePools Status RECONCILING: "some work is actively being done on the node pool, such as upgrading
    # node software. Details can be found in the statusMessage field."
    message = "Upgrading nodes to 1.33.5-gke.1200000."
    google.routes[("GET", NODE_POOL_PATH)] = reply("node_pool", status="RECONCILING", statusMessage=message)
    change = machines(google).pool_change("gpu")
    assert change == f"node pool slonk-gpu-a3 is RECONCILING: {message}"
    assert google.calls() == [("GET", NODE_POOL_PATH)]


def test_pool_change_names_a_group_that_is_not_stable(google: FakeGoogle) -> None:
    # A surge upgrade or an auto-repair: the node pool may still say RUNNING while its MIG is busy.
    google.routes[("GET", IGM_PATH)] = reply(
        "instance_group_manager",
        targetSize=4,
        currentActions={"none": 2, "creating": 2, "deleting": 1, "recreating": 0},
        status={"isStable": False},
    )
    change = machines(google).pool_change("gpu")
    assert change == f"instance group {ZONE}/{GROUP} is not stable (creating 2, deleting 1)"


def test_pool_change_checks_every_group_of_the_pool(google: FakeGoogle) -> None:
    google.routes[("GET", NODE_POOL_PATH)] = reply("node_pool_blue_green", status="RUNNING")
    google.routes[("GET", IGM2_PATH)] = reply("instance_group_manager", name=GROUP2, status={"isStable": False})
    assert machines(google).pool_change("gpu") == f"instance group {ZONE}/{GROUP2} is not stable"
    assert google.calls() == [("GET", NODE_POOL_PATH), ("GET", IGM_PATH), ("GET", IGM2_PATH)]


def test_group_urls() -> None:
    assert group_of_url(
        f"https://www.googleapis.com/compute/v1/projects/p/zones/{ZONE}/instanceGroupManagers/g"
    ) == Group("p", ZONE, "g")
    assert group_of_url(f"projects/123/zones/{ZONE}/instanceGroups/g-grp") == Group("123", ZONE, "g-grp")
    assert group_of_url("projects/123/regions/us-central1/instanceGroupManagers/g") is None
    assert group_of_url("") is None


def test_connect_makes_no_call_and_no_credentials_until_used() -> None:
    made = connect(POOLS)
    assert isinstance(made, GcpMachines)
    assert made.timeout == TIMEOUT_SECONDS
    with pytest.raises(ValueError, match="'gcp'"):
        GcpMachines(CloudPools(cloud="aws", cluster="c", location="us-east-1"))


def test_missing_credentials_or_project_is_a_cloud_call_error() -> None:
    def no_credentials() -> GcpClients:
        raise RuntimeError("Your default credentials were not found.")

    with pytest.raises(CloudCallError, match="default credentials were not found") as info:
        GcpMachines(POOLS, no_credentials).pool_size("gpu")
    assert info.value.call == "google.auth.default"
    credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
    no_project = make_clients(credentials, "", compute_endpoint="http://127.0.0.1:9")
    with pytest.raises(CloudCallError, match="GOOGLE_CLOUD_PROJECT"):
        GcpMachines(POOLS, no_project).pool_size("gpu")
