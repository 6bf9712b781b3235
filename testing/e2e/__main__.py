"""``python3 -m testing.e2e``: build the image, run each declaration's pods, print one line per scenario.

Output ends with ``e2e: N passed, N failed (...)``; the exit status is 0 only when nothing failed.
Options: ``--declaration local|gpu-shaped|gpu-eks|tpu-gke`` (repeatable; default all), ``--only N`` (repeatable),
``--keep`` (leave the pods running after the run, for a look at them; remove them by the printed prefix).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from testing.e2e.cluster import Cluster
from testing.e2e.commands import check_image, shipped_stack_commands
from testing.e2e.image import SLURM_VERSION, build_image, ssh_keygen
from testing.e2e.podman import Podman, interrupt_on_sigterm
from testing.e2e.scenarios import SCENARIOS
from testing.e2e.stack import DECLARATIONS, ClusterSecrets, render


def main(argv: list[str] | None = None) -> int:
    """Run the tier; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python3 -m testing.e2e", description=__doc__)
    parser.add_argument("--declaration", action="append", choices=sorted(DECLARATIONS))
    parser.add_argument("--only", action="append", type=int, help="scenario numbers to run (1 always runs)")
    parser.add_argument("--keep", action="store_true", help="leave the pods and network for inspection")
    parser.add_argument("--remove", metavar="WORKDIR", help="remove what a --keep run left, then exit")
    args = parser.parse_args(argv)
    if args.remove:
        return remove_kept(Path(args.remove))
    declarations = args.declaration or list(DECLARATIONS)
    wanted = set(args.only or [s.number for s in SCENARIOS]) | {1}

    t_start = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="slonk-e2e-"))
    podman = Podman(workdir)
    (workdir / "prefix").write_text(podman.prefix, encoding="utf-8")
    print(f"e2e: run prefix {podman.prefix}, work dir {workdir}", flush=True)

    interrupt_on_sigterm()
    passed = failed = 0
    try:
        t0 = time.monotonic()
        image = build_image(podman, SLURM_VERSION)
        print(
            f"image {image.reference} (Slurm {image.slurm_version}, Debian {image.suite}): "
            f"rootfs {image.rootfs_s:.1f}s, import {image.import_s:.1f}s, build {image.build_s:.1f}s, "
            f"total {time.monotonic() - t0:.1f}s",
            flush=True,
        )
        try:  # what the tier never starts (the operations controller) must still find its program
            found = check_image(podman, image.reference, shipped_stack_commands())
            print(f"PASS image: {found} (every container of the shipped stacks)", flush=True)
            passed += 1
        except AssertionError as exc:
            print(f"FAIL image: {exc}", flush=True)
            failed += 1
        for decl in declarations:
            cluster_secrets = ClusterSecrets.make(
                workdir / f"keys-{decl}", ssh_keygen(podman, image.reference, workdir / f"keys-{decl}")
            )
            rendered = render(decl, image.slurm_version, cluster_secrets)
            print(f"[{decl}] {len(rendered.objects.items)} rendered objects; stand-ins:", flush=True)
            for line in rendered.standins or ["none"]:
                print(f"[{decl}]   - {line}", flush=True)
            cluster = Cluster(podman, rendered, image.reference, cluster_secrets)
            try:
                for scenario in SCENARIOS:
                    if scenario.number not in wanted:
                        continue
                    why_not = scenario.applies(cluster)
                    if why_not:  # not a pass and not a failure: said, and not counted
                        print(f"n/a  [{decl}] {scenario.number}. {scenario.title}: {why_not}", flush=True)
                        continue
                    t1 = time.monotonic()
                    try:
                        detail = scenario.run(cluster)
                        passed += 1
                        print(f"PASS [{decl}] {scenario.number}. {scenario.title} "
                              f"({time.monotonic() - t1:.1f}s): {detail}", flush=True)  # fmt: skip
                    except Exception as exc:  # a failed scenario is reported, the run goes on
                        failed += 1
                        print(f"FAIL [{decl}] {scenario.number}. {scenario.title} "
                              f"({time.monotonic() - t1:.1f}s): {exc}", flush=True)  # fmt: skip
                        if not isinstance(exc, AssertionError | TimeoutError):
                            traceback.print_exc()
                        if scenario.number == 1:
                            _dump(cluster)
                            break
                        _diagnose(cluster)
            finally:
                if not args.keep:
                    cluster.down()
    except KeyboardInterrupt as exc:
        print(f"e2e: interrupted ({exc})", flush=True)
        failed += 1
    except Exception:
        traceback.print_exc()
        failed += 1
    finally:
        if args.keep:
            print(f"e2e: kept; remove with: python3 -m testing.e2e --remove {workdir}", flush=True)
        else:
            left = podman.cleanup()
            if left:
                print(f"e2e: could not remove {left}", flush=True)
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"e2e: {passed} passed, {failed} failed ({time.monotonic() - t_start:.1f}s)", flush=True)
    return 0 if failed == 0 and passed > 0 else 1


def remove_kept(workdir: Path) -> int:
    """Remove the pods and network a ``--keep`` run created (found by its recorded prefix) and its work dir."""
    prefix = (workdir / "prefix").read_text(encoding="utf-8").strip()
    podman = Podman(workdir, prefix=prefix)
    names = podman.run("pod", "ls", "--format", "{{.Name}}").stdout.split()
    podman.pods = [n for n in names if n.startswith(f"{prefix}-")]
    ctrs = podman.run("ps", "-a", "--format", "{{.Names}}").stdout.split()
    podman.containers = [n for n in ctrs if n.startswith(f"{prefix}-")]  # the laptop, the DNS, Service stand-ins
    podman.networks = [f"{prefix}-net"]
    left = podman.cleanup()
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"e2e: removed {prefix}" + (f"; could not remove {left}" if left else ""))
    return 1 if left else 0


def _dump(cluster: Cluster) -> None:
    """Last log lines of every container of a cluster that did not come up."""
    for name, pod in cluster.pods.items():
        for ctr in [*pod.sidecars, *pod.main]:
            proc = cluster.podman.run("logs", "--tail", "15", ctr, check=False)
            text = (proc.stdout + proc.stderr).strip().replace("\n", "\n      ")
            print(f"    --- {name} {ctr.rsplit('-', 1)[-1]}:\n      {text}", flush=True)


def _diagnose(cluster: Cluster) -> None:
    """What Slurm says after a failed scenario: which controller answers, the queue, each node's state and
    reason, and each controller's last log lines (a later scenario's failure is often this one's leftover)."""
    login = cluster.a_login_pod()
    lines: list[str] = []
    if login is not None:
        try:
            out = cluster.exec(login, "scontrol ping; squeue -o '%i %u %T %r %N'", timeout=60)
            lines += (out.stdout + out.stderr).strip().splitlines()
            nodes = cluster.exec(login, "scontrol --future show nodes -o", timeout=60).stdout
            for line in nodes.splitlines():
                fields = dict(re.findall(r"(\w+)=(\S*)", line))
                reason = re.search(r"Reason=(.*?)(?: \w+=|$)", line)
                lines.append(f"{fields.get('NodeName')} {fields.get('State')} {reason.group(1) if reason else ''}")
        except Exception as exc:  # a diagnosis must not end the run
            lines.append(f"({exc})")
    print("    --- slurm now:\n      " + "\n      ".join(lines), flush=True)
    for name in cluster.controllers():
        try:
            text = "\n".join(cluster.logs(name, tail=25).strip().splitlines()[-25:])
        except Exception as exc:
            text = f"({exc})"
        print(f"    --- {name} log:\n      " + text.replace("\n", "\n      "), flush=True)


if __name__ == "__main__":
    sys.exit(main())
