"""What kubelet would do with a pod's volumes and names, from the rendered objects.

ConfigMap, Secret and projected volumes become directories holding the object's keys at their paths
and modes (``defaultMode`` / item ``mode``; fsGroup adds group read as kubelet does); emptyDir a 0777
directory per pod; a claim bound to a PersistentVolume (the shared filesystems: NFS, Filestore, EFS...)
one directory shared by every pod, as a ReadWriteMany volume; any other claim a directory of its own
that outlives the pod (the controller's state). Service DNS names follow the cluster DNS spec.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
CLUSTER_DOMAIN = "cluster.local"
DEFAULT_FILE_MODE = 0o644


class Objects:
    """The rendered objects of one stack, by kind and name."""

    def __init__(self, objects: Iterable[Obj]) -> None:
        self.items: list[Obj] = list(objects)
        self._by: dict[tuple[str, str], Obj] = {(o["kind"], o["metadata"]["name"]): o for o in self.items}

    def get(self, kind: str, name: str) -> Obj:
        """The object of ``kind`` named ``name``; KeyError naming both when it is not rendered."""
        try:
            return self._by[(kind, name)]
        except KeyError:
            raise KeyError(f"the rendered objects have no {kind} named {name!r}") from None

    def of_kind(self, kind: str) -> list[Obj]:
        """Every object of ``kind`` in render order."""
        return [o for o in self.items if o["kind"] == kind]

    def services_selecting(self, labels: Mapping[str, str]) -> list[Obj]:
        """Services whose selector matches a pod's labels."""
        out = []
        for svc in self.of_kind("Service"):
            selector = svc.get("spec", {}).get("selector") or {}
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                out.append(svc)
        return out


def dns_names(name: str, namespace: str, service: str | None, services: Iterable[Obj]) -> list[str]:
    """DNS names of a pod: ``NAME.SVC[.NS[.svc[.cluster.local]]]`` under its StatefulSet's Service, and
    ``SVC[.NS[.svc[.cluster.local]]]`` of every Service selecting it (headless: the pod's own address)."""
    out: list[str] = []
    if service:
        fqdn = f"{name}.{service}.{namespace}.svc.{CLUSTER_DOMAIN}"
        out += [f"{name}.{service}", f"{name}.{service}.{namespace}", f"{name}.{service}.{namespace}.svc", fqdn]
    for svc in services:
        sname = svc["metadata"]["name"]
        out += [sname, f"{sname}.{namespace}", f"{sname}.{namespace}.svc", f"{sname}.{namespace}.svc.{CLUSTER_DOMAIN}"]
    return list(dict.fromkeys(out))


def pod_reverse_name(
    name: str, namespace: str, service: str | None, address: str, services: Iterable[Obj]
) -> str | None:
    """The name a pod's address answers to in a cluster's DNS: ``NAME.SVC.NS.svc.cluster.local`` under its
    StatefulSet's Service, else the dashed address under the first Service selecting it (CoreDNS's
    kubernetes plugin answers reverse lookups of Service endpoints so), else none."""
    if service:
        return f"{name}.{service}.{namespace}.svc.{CLUSTER_DOMAIN}"
    for svc in services:
        return f"{address.replace('.', '-')}.{svc['metadata']['name']}.{namespace}.svc.{CLUSTER_DOMAIN}"
    return None


def dns_searches(namespace: str, pod_spec: Obj) -> tuple[list[str], list[str]]:
    """resolv.conf search list and options of a pod with dnsPolicy ClusterFirst."""
    cfg = pod_spec.get("dnsConfig") or {}
    searches = [f"{namespace}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}", CLUSTER_DOMAIN, *cfg.get("searches", [])]
    options = ["ndots:5"] + [
        f"{o['name']}:{o['value']}" if o.get("value") else o["name"] for o in cfg.get("options", [])
    ]
    return list(dict.fromkeys(searches)), options


@dataclass(frozen=True)
class VolumeDir:
    """A pod volume as a directory on this machine."""

    host: Path
    read_only: bool  # ConfigMap / Secret / projected: kubelet mounts these read-only


def _write_items(target: Path, data: Mapping[str, bytes], items: list[Obj] | None, default_mode: int) -> None:
    """Keys of a ConfigMap/Secret as files: every key, or only ``items`` at their paths and modes."""
    chosen = items if items is not None else [{"key": k, "path": k} for k in data]
    for item in chosen:
        if item["key"] not in data:
            raise KeyError(f"volume item names key {item['key']!r}, which the object does not have")
        path = target / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[item["key"]])
        os.chmod(path, int(item.get("mode", default_mode)))


def object_data(obj: Obj, overrides: Mapping[str, bytes] | None = None) -> dict[str, bytes]:
    """A ConfigMap's or Secret's keys as bytes (Secret ``data`` is base64, ``stringData`` is not)."""
    out: dict[str, bytes] = {}
    if obj["kind"] == "Secret":
        out.update({k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()})
        out.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
    else:
        out.update({k: v.encode() for k, v in (obj.get("data") or {}).items()})
        out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    out.update(overrides or {})
    return out


SecretOverrides = Mapping[str, Mapping[str, bytes]]  # Secret name -> key -> value, for one pod only


def fill_volume(target: Path, volume: Obj, objects: Objects, secret_overrides: SecretOverrides | None = None) -> None:
    """Write a ConfigMap, Secret or projected volume's files into ``target`` (emptied first)."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    overrides = secret_overrides or {}
    if "configMap" in volume:
        src = volume["configMap"]
        cm = objects.get("ConfigMap", src["name"])
        _write_items(target, object_data(cm), src.get("items"), src.get("defaultMode", DEFAULT_FILE_MODE))
    elif "secret" in volume:
        src = volume["secret"]
        sec = objects.get("Secret", src["secretName"])
        data = object_data(sec, overrides.get(src["secretName"]))
        _write_items(target, data, src.get("items"), src.get("defaultMode", DEFAULT_FILE_MODE))
    elif "projected" in volume:
        proj = volume["projected"]
        mode = proj.get("defaultMode", DEFAULT_FILE_MODE)
        for source in proj["sources"]:
            if "configMap" in source:
                s = source["configMap"]
                _write_items(target, object_data(objects.get("ConfigMap", s["name"])), s.get("items"), mode)
            elif "secret" in source:
                s = source["secret"]
                data = object_data(objects.get("Secret", s["name"]), overrides.get(s["name"]))
                _write_items(target, data, s.get("items"), mode)
            else:
                raise ValueError(f"projected source {sorted(source)} is not supported by the harness")
    else:
        raise ValueError(f"volume {volume['name']!r} is not a ConfigMap, Secret or projected volume")


def apply_fs_group(path: Path, gid: int, read_only: bool) -> None:
    """What kubelet does to a volume for ``fsGroup``: group ownership, group access, setgid directories."""
    file_bits = 0o440 if read_only else 0o660
    dir_bits = 0o2000 | (0o550 if read_only else 0o770)
    for root, dirs, files in os.walk(path):
        os.chown(root, -1, gid)
        os.chmod(root, os.stat(root).st_mode & 0o7777 | dir_bits)
        for name in files:
            f = os.path.join(root, name)
            os.chown(f, -1, gid)
            os.chmod(f, os.stat(f).st_mode & 0o7777 | file_bits)
        del dirs  # os.walk descends on its own


def claim_key(objects: Objects, claim: str) -> tuple[str, bool]:
    """Directory key of a claim and whether it is a shared (PersistentVolume-bound, ReadWriteMany) volume."""
    try:
        pvc = objects.get("PersistentVolumeClaim", claim)
    except KeyError:
        return f"pvc-{claim}", False  # a StatefulSet volumeClaimTemplate's per-pod claim
    pv = pvc.get("spec", {}).get("volumeName")
    if pv:
        return f"pv-{pv}", True
    return f"pvc-{claim}", False
