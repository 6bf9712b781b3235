"""testing.fakekube, the fake Kubernetes API server, held to the real client's behaviour."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slonk_infra.ops.kube_api import KubeApi, KubeError
from testing.fakekube import FakeKube, merge_patch, selector_matches


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube() as server:
        yield server


def test_lists_with_label_selectors_through_the_real_client(fake: FakeKube) -> None:
    fake.add_node("n1", labels={"pool": "a"})
    fake.add_node("n2", labels={"pool": "b"})
    fake.add_pod("w-0", "slurm", "n1", labels={"app.kubernetes.io/component": "worker"})
    fake.add_pod("login-0", "slurm", "n1", labels={"app.kubernetes.io/component": "login"})
    fake.add_pod("w-0", "other", "n2", labels={"app.kubernetes.io/component": "worker"})
    api = fake.client("slurm")
    assert [n.name for n in api.list_nodes("pool=b")] == ["n2"]
    assert sorted(n.name for n in api.list_nodes()) == ["n1", "n2"]
    pods = api.list_pods("app.kubernetes.io/component=worker")
    assert [(p.name, p.node_name) for p in pods] == [("w-0", "n1")]
    assert pods[0].created > 0 and pods[0].phase == "Running" and not pods[0].deleting
    assert api.calls == {"list_nodes": 2, "list_pods": 1}
    assert fake.requests == {("GET", "nodes"): 2, ("GET", "pods"): 1}


def test_patches_merge_and_remove_annotations_and_cordon(fake: FakeKube) -> None:
    fake.add_node("n1", annotations={"keep": "1", "drop": "2"})
    api = fake.client("slurm")
    api.patch_node("n1", {"metadata": {"annotations": {"drop": None, "new": "3"}}, "spec": {"unschedulable": True}})
    node = fake.node("n1")
    assert node["metadata"]["annotations"] == {"keep": "1", "new": "3"}
    assert node["spec"]["unschedulable"] is True
    (listed,) = api.list_nodes()
    assert listed.unschedulable and listed.annotations == {"keep": "1", "new": "3"}


def test_errors_come_back_as_kube_errors(fake: FakeKube) -> None:
    api = fake.client("slurm")
    with pytest.raises(KubeError, match="HTTP 404"):
        api.patch_node("missing", {"metadata": {"annotations": {"a": "b"}}})
    api.delete_pod("missing")  # already gone is fine
    bad = KubeApi.connect(fake.url, "wrong", "slurm")
    with pytest.raises(KubeError, match="HTTP 401"):
        bad.list_nodes()


def test_objects_deserialize_into_the_clients_typed_models(fake: FakeKube) -> None:
    fake.add_node("n1", taints=[{"key": "k", "effect": "NoSchedule"}])
    fake.add_pod("w-0", "slurm", "n1", labels={"a": "b"})
    core = fake.client("slurm").core
    node = core.read_node("n1")
    assert node.metadata.name == "n1" and node.spec.taints[0].key == "k"
    assert node.status.node_info.boot_id == "boot-1"
    patched = core.patch_node("n1", {"spec": {"unschedulable": True}})
    assert patched.spec.unschedulable is True
    (pod,) = core.list_namespaced_pod("slurm").items
    assert pod.spec.node_name == "n1"


def test_delete_pod_calls_the_hook(fake: FakeKube) -> None:
    fake.add_pod("w-0", "slurm", "n1", labels={"a": "b"})
    seen: list[str] = []
    fake.on_delete = lambda obj: seen.append(obj["metadata"]["name"])
    fake.client("slurm").delete_pod("w-0")
    assert seen == ["w-0"] and fake.pod("slurm", "w-0") is None


def test_selector_and_merge_patch_semantics() -> None:
    labels = {"a": "1", "b": "2"}
    assert selector_matches("a=1,b==2", labels)
    assert not selector_matches("a!=1", labels)
    assert selector_matches("a,!c", labels)
    assert not selector_matches("c", labels)
    assert merge_patch({"x": {"y": 1, "z": 2}}, {"x": {"y": None, "w": 3}}) == {"x": {"z": 2, "w": 3}}
