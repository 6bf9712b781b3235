"""The NVML stand-in (testing/nvml): unmodified pynvml and slonk-health against the libnvidia-ml.so.1
built from standin.c, loaded in a child process through LD_LIBRARY_PATH as on a GPU node.

Nothing here skips: without gcc the build fails and so do the tests (the container tier needs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slonk_infra.health.checks import GPU_CHECKS
from slonk_infra.health.result import EXIT_CODES, Action, CheckResult, HealthReport
from slonk_infra.health.state import NodeState
from testing.nvml import (
    DEFAULT_RECORDING,
    LEFTOVER_BYTES,
    LEFTOVER_PID,
    PROFILE_ENV,
    SONAME,
    StandinError,
    build,
    profile_text,
    write_profile,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "nvml"
RECORDING: dict[str, Any] = json.loads(DEFAULT_RECORDING.read_text(encoding="utf-8"))
RECORDED: dict[str, Any] = RECORDING["devices"]["0"]
SPEC: dict[str, Any] = {
    "gpu": {"count": 8, "xidWaitMs": 300, "idleGraceSeconds": 0},
    "disk": {"scratchPath": None, "homePath": None},
}
# Every NVML function slonk-health reaches through pynvml 13 (the names pynvml resolves).
SLONK_HEALTH_CALLS = [
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetGpuMaxPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetSupportedEventTypes",
    "nvmlEventSetCreate",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
    "nvmlEventSetFree",
]


@pytest.fixture(scope="module")
def lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lib = build(tmp_path_factory.mktemp("nvml-standin"))
    assert lib.name == SONAME and lib.is_file()
    return lib.parent


def child_env(lib_dir: Path, profile: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SLURMD_NODENAME", "SLURM_JOB_GPUS", PROFILE_ENV)}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(lib_dir), env.get("LD_LIBRARY_PATH", "")) if p)
    env[PROFILE_ENV] = str(profile)
    env.update(extra or {})
    return env


def health(
    lib_dir: Path,
    profile: Path,
    tmp_path: Path,
    mode: str,
    *args: str,
    spec: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[HealthReport, str]:
    """Run ``python -m slonk_infra.health`` against the stand-in; the report from --report-file. In prolog
    and epilog the job holds the whole node's GPUs, as slurmd says (``SLURM_JOB_GPUS``), unless ``env`` says."""
    if mode in ("prolog", "epilog"):
        env = {"SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7", **(env or {})}
    spec_file = tmp_path / "health.json"
    spec_file.write_text(json.dumps(spec or SPEC), encoding="utf-8")
    report_file = tmp_path / f"report-{mode}.json"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "slonk_infra.health", "--mode", mode, "--spec", str(spec_file)),
            *("--gpus", "8", "--tpu-chips", "0", "--no-drain", "--report-file", str(report_file), *args),
        ],
        cwd=ROOT,
        env=child_env(lib_dir, profile, env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = HealthReport.model_validate_json(report_file.read_text(encoding="utf-8"))
    assert proc.returncode == report.exit_code, proc.stderr
    assert HealthReport.model_validate_json(proc.stdout) == report
    return report, proc.stderr


def gpu_results(report: HealthReport) -> dict[str, CheckResult]:
    return {r.check: r for r in report.results if r.check in GPU_CHECKS}


def run_pynvml(lib_dir: Path, profile: Path, script: str, *argv: str) -> Any:
    """Run ``script`` (unmodified pynvml, loaded as on a node) in a child; its stdout as JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *argv],
        cwd=ROOT,
        env=child_env(lib_dir, profile),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# ---- the library itself ----


def test_exports_every_function_slonk_health_calls(lib_dir: Path, tmp_path: Path) -> None:
    script = (
        "import ctypes, json, sys\n"
        f"lib = ctypes.CDLL({SONAME!r})\n"
        "print(json.dumps([n for n in sys.argv[1:] if not hasattr(lib, n)]))\n"
    )
    assert run_pynvml(lib_dir, tmp_path / "unused", script, *SLONK_HEALTH_CALLS) == []


PYNVML_WALK = """
import json, os, shutil, sys
import pynvml as nv

def code(call, *args):
    try:
        call(*args)
    except nv.NVMLError as exc:
        return exc.value
    return 0

out = {"beforeInit": code(nv.nvmlDeviceGetCount)}
nv.nvmlInit()
out["count"] = nv.nvmlDeviceGetCount()
out["driver"] = nv.nvmlSystemGetDriverVersion()
devs = []
for i in range(out["count"]):
    h = nv.nvmlDeviceGetHandleByIndex(i)
    pci = nv.nvmlDeviceGetPciInfo(h)
    v1 = nv.nvmlDeviceGetMemoryInfo(h)
    v2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
    procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
    devs.append({
        "index": nv.nvmlDeviceGetIndex(h),
        "minor": nv.nvmlDeviceGetMinorNumber(h),
        "name": nv.nvmlDeviceGetName(h),
        "uuid": nv.nvmlDeviceGetUUID(h),
        "pci": [pci.busId, pci.busIdLegacy, pci.domain, pci.bus, pci.device],
        "memV1": [v1.total, v1.free, v1.used],
        "memV2": [v2.version, v2.total, v2.reserved, v2.free, v2.used],
        "procs": [[p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId] for p in procs],
        "throttle": nv.nvmlDeviceGetCurrentClocksThrottleReasons(h),
    })
out["devices"] = devs
out["badIndex"] = code(nv.nvmlDeviceGetHandleByIndex, out["count"])
out["badSensor"] = code(nv.nvmlDeviceGetTemperature, nv.nvmlDeviceGetHandleByIndex(0), 1)
out["errorString"] = nv.nvmlErrorString(15)

def listen(mask):
    s = nv.nvmlEventSetCreate()
    for i in range(nv.nvmlDeviceGetCount()):
        nv.nvmlDeviceRegisterEvents(nv.nvmlDeviceGetHandleByIndex(i), mask, s)
    got = []
    while True:
        try:
            d = nv.nvmlEventSetWait(s, 100)
        except nv.NVMLError_Timeout:
            break
        got.append([nv.nvmlDeviceGetIndex(d.device), d.eventType, d.eventData, d.gpuInstanceId])
    nv.nvmlEventSetFree(s)
    return got

out["eventsOtherType"] = listen(nv.nvmlEventTypeDoubleBitEccError)
out["events"] = listen(nv.nvmlEventTypeXidCriticalError | nv.nvmlEventTypeDoubleBitEccError)
out["eventsAgain"] = listen(nv.nvmlEventTypeXidCriticalError)
out["registerUnsupported"] = code(nv.nvmlDeviceRegisterEvents, nv.nvmlDeviceGetHandleByIndex(0), 1 << 40, nv.nvmlEventSetCreate())
nv.nvmlShutdown()
out["afterShutdown"] = code(nv.nvmlDeviceGetCount)
shutil.copy(sys.argv[1], os.environ["SLONK_NVML_PROFILE"])  # the next nvmlInit reads the new profile
nv.nvmlInit()
out["countAfterReinit"] = nv.nvmlDeviceGetCount()
out["eventsAfterReinit"] = listen(nv.nvmlEventTypeXidCriticalError)
nv.nvmlShutdown()
print(json.dumps(out))
"""


def test_pynvml_reads_the_profile_with_nvmls_struct_layouts(lib_dir: Path, tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "node.profile", faults={3: ["leftover-process"], 5: ["xid-79", "xid-13"]})
    later = write_profile(tmp_path / "later.profile", missing=1, faults={2: ["xid-48"]})
    out = run_pynvml(lib_dir, profile, PYNVML_WALK, str(later))

    assert out["beforeInit"] == 1  # NVML_ERROR_UNINITIALIZED
    assert (out["count"], out["driver"]) == (8, RECORDING["system"]["driverVersion"]["value"])
    devs = out["devices"]
    assert [d["index"] for d in devs] == [d["minor"] for d in devs] == list(range(8))
    assert {d["name"] for d in devs} == {RECORDED["name"]["value"]}
    assert devs[0]["uuid"] == RECORDED["uuid"]["value"] and len({d["uuid"] for d in devs}) == 8
    assert devs[0]["pci"] == ["00000000:00:06.0", "0000:00:06.0", 0, 0, 6]
    assert devs[7]["pci"] == ["00000000:00:0D.0", "0000:00:0D.0", 0, 0, 13]
    mem = RECORDED["memory"]["value"]
    total, reserved = mem["total"], mem["reserved"]
    assert devs[0]["memV2"] == [0x02000028, total, reserved, total - reserved, 0]
    assert devs[0]["memV1"] == [total, total - reserved, reserved]  # v1 counts the driver's reserve as used
    assert devs[3]["memV2"] == [0x02000028, total, reserved, total - reserved - LEFTOVER_BYTES, LEFTOVER_BYTES]
    assert devs[3]["procs"] == [[LEFTOVER_PID, LEFTOVER_BYTES, 0xFFFFFFFF, 0xFFFFFFFF]]
    assert [d["procs"] for i, d in enumerate(devs) if i != 3] == [[]] * 7
    assert {d["throttle"] for d in devs} == {RECORDED["clockEventReasons"]["value"]}
    assert (out["badIndex"], out["badSensor"], out["errorString"]) == (2, 2, "GPU is lost")

    # Pending events go to a set registered for their type, each once per nvmlInit, in GPU order.
    assert out["eventsOtherType"] == []
    assert out["events"] == [[5, 8, 79, 0xFFFFFFFF], [5, 8, 13, 0xFFFFFFFF]]
    assert out["eventsAgain"] == []
    assert out["registerUnsupported"] == 3  # a type the GPU does not offer
    assert out["afterShutdown"] == 1
    assert out["countAfterReinit"] == 7
    assert out["eventsAfterReinit"] == [[2, 8, 48, 0xFFFFFFFF]]


# ---- slonk-health against the default profile: 8 copies of the recorded H100 ----


def test_slonk_health_reads_what_the_h100_answered(lib_dir: Path, tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "node.profile")
    record = tmp_path / "answers.json"
    report, err = health(lib_dir, profile, tmp_path, "boot", "--nvml-record", str(record))
    assert (report.ok, report.exit_code, err) == (True, 0, "")
    answers = json.loads(record.read_text(encoding="utf-8"))

    assert answers["init"] == {"error": None}
    assert answers["system"] == {
        "deviceCount": {"value": 8},
        "driverVersion": RECORDING["system"]["driverVersion"],
        "events": {"value": []},
    }
    assert sorted(answers["devices"]) == [str(i) for i in range(8)]
    for i in range(8):
        got = answers["devices"][str(i)]
        assert set(got) == set(RECORDED), f"GPU {i} read other keys than the recording holds"
        for key, answer in RECORDED.items():
            if key in ("uuid", "pciBusId"):
                continue
            assert got[key] == answer, f"GPU {i} {key}"
    assert answers["devices"]["0"]["uuid"] == RECORDED["uuid"]
    assert answers["devices"]["0"]["pciBusId"] == RECORDED["pciBusId"]
    assert len({answers["devices"][str(i)]["uuid"]["value"] for i in range(8)}) == 8
    assert len({answers["devices"][str(i)]["pciBusId"]["value"] for i in range(8)}) == 8


@pytest.mark.parametrize(
    ("mode", "left_out"),
    [("boot", set()), ("interval", {"gpu-idle"}), ("prolog", {"gpu-xid"}), ("epilog", {"gpu-xid"})],
)
def test_every_gpu_check_passes_on_a_healthy_node(lib_dir: Path, tmp_path: Path, mode: str, left_out: set[str]) -> None:
    profile = write_profile(tmp_path / "node.profile")
    report, err = health(lib_dir, profile, tmp_path, mode)
    results = gpu_results(report)
    assert set(results) == set(GPU_CHECKS) - left_out
    assert {name: (r.ok, r.action) for name, r in results.items()} == {name: (True, "none") for name in results}
    assert (report.ok, report.exit_code, report.fingerprint.kind, err) == (True, 0, "gpu-uuids", "")
    assert results["gpu-count"].reason == "8 GPUs visible as declared"
    assert [g["name"] for g in results["gpu-count"].figures["gpus"]] == [RECORDED["name"]["value"]] * 8
    if "gpu-xid" in results:
        xid = results["gpu-xid"].figures
        assert xid["supported"] is True and xid["events"] == []
        assert xid["supportedEvents"] == {str(i): 0x8 | 0x2 for i in range(8)}
    if "gpu-idle" in results:
        assert [g["processes"] for g in results["gpu-idle"].figures["gpus"]] == [[]] * 8


# ---- each fault fails exactly its check ----


@pytest.mark.parametrize(
    ("faults", "missing", "mode", "check", "action", "reason"),
    [
        ({2: ["ecc-uncorrectable"]}, 0, "interval", "gpu-ecc", "replace-machine", "GPU 2: 1 volatileUncorrected ECC errors (limit 0)"),
        ({5: ["xid-79"]}, 0, "interval", "gpu-xid", "replace-machine", "GPU 5: XID 79 (GPU has fallen off the bus)"),
        ({1: ["remapped-rows-failure"]}, 0, "interval", "gpu-remapped-rows", "needs-person", "GPU 1: row remapping failed (out of spare rows; the GPU needs RMA)"),
        ({7: ["pcie-x8"]}, 0, "interval", "gpu-pcie", "replace-machine", "GPU 7: PCIe link x8, below its maximum x16"),
        ({3: ["leftover-process"]}, 0, "prolog", "gpu-idle", "restart-pod", "GPU 3 at idle: 1 compute processes (pids 4242) and 1024 MiB in use (limit 256)"),
        ({3: ["leftover-process"]}, 0, "epilog", "gpu-idle", "restart-pod", "GPU 3 at idle: 1 compute processes (pids 4242) and 1024 MiB in use (limit 256)"),
        ({}, 1, "interval", "gpu-count", "replace-machine", "7 of 8 GPUs visible"),
    ],
)  # fmt: skip
def test_a_fault_fails_exactly_its_check(
    lib_dir: Path,
    tmp_path: Path,
    faults: dict[int, list[str]],
    missing: int,
    mode: str,
    check: str,
    action: Action,
    reason: str,
) -> None:
    profile = write_profile(tmp_path / "node.profile", faults=faults, missing=missing)
    report, err = health(lib_dir, profile, tmp_path, mode)
    results = gpu_results(report)
    failing = {name: (r.action, r.reason) for name, r in results.items() if not r.ok}
    assert failing == {check: (action, reason)}
    assert len(results) == 6  # the others ran, on every GPU NVML sees, and passed
    assert (report.action, report.exit_code) == (action, EXIT_CODES[action])
    assert err.strip() == f"slonk-health {mode}: {check}: {action}: {reason}"


def test_the_profile_changes_between_runs(lib_dir: Path, tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "node.profile", faults={4: ["pcie-x8"]})
    first, _ = health(lib_dir, profile, tmp_path, "interval")
    write_profile(profile)
    second, _ = health(lib_dir, profile, tmp_path, "interval")
    assert (gpu_results(first)["gpu-pcie"].action, gpu_results(second)["gpu-pcie"].action) == (
        "replace-machine",
        "none",
    )


def test_job_gpus_map_to_nvml_devices_by_minor_number(lib_dir: Path, tmp_path: Path) -> None:
    # NVML index 0 is /dev/nvidia7 (Slurm's GPU 7) and holds a leftover process.
    profile = write_profile(tmp_path / "node.profile", minors=list(range(7, -1, -1)), faults={0: ["leftover-process"]})
    shared = {**SPEC, "exclusiveNodes": False}
    theirs, _ = health(lib_dir, profile, tmp_path, "epilog", spec=shared, env={"SLURM_JOB_GPUS": "7"})
    idle = gpu_results(theirs)["gpu-idle"]
    assert (idle.action, [g["index"] for g in idle.figures["gpus"]]) == ("restart-pod", [0])
    assert idle.reason.startswith("GPU 0 at idle: 1 compute processes (pids 4242)")
    other, _ = health(lib_dir, profile, tmp_path, "epilog", spec=shared, env={"SLURM_JOB_GPUS": "0,1"})
    idle = gpu_results(other)["gpu-idle"]
    assert (idle.ok, [g["index"] for g in idle.figures["gpus"]]) == (True, [6, 7])


# ---- profiles made from recordings: the live stand-in judges as the replay does ----


@pytest.mark.parametrize("name", ["h100-idle", "h100-busy", "h100b-idle"])
def test_stand_in_and_replay_of_a_recording_agree(lib_dir: Path, tmp_path: Path, name: str) -> None:
    recording = DATA / f"{name}.json"
    profile = write_profile(tmp_path / "node.profile", gpus=1, recording=recording)
    spec = {**SPEC, "gpu": {**SPEC["gpu"], "count": 1}}
    live, _ = health(lib_dir, profile, tmp_path, "boot", "--gpus", "1", spec=spec)
    replayed, _ = health(lib_dir, profile, tmp_path, "boot", "--gpus", "1", "--nvml-replay", str(recording), spec=spec)
    assert live.results == replayed.results
    assert live.fingerprint == replayed.fingerprint
    assert live.ok == (name != "h100-busy")


def test_an_injected_error_and_an_unset_value(lib_dir: Path, tmp_path: Path) -> None:
    text = profile_text().replace("gpu 6 remappedRows 0 0 0 0\n", "gpu 6 error nvmlDeviceGetRemappedRows 15\n")
    text = text.replace("gpu 2 remappedRows 0 0 0 0\n", "")  # a GPU without row remapping: not supported
    profile = tmp_path / "node.profile"
    profile.write_text(text, encoding="utf-8")
    report, _ = health(lib_dir, profile, tmp_path, "interval")
    assert [r.check for r in report.results if not r.ok] == ["gpu-remapped-rows"]
    rows = gpu_results(report)["gpu-remapped-rows"]
    assert (rows.action, rows.reason) == (
        "replace-machine",
        "GPU 6: reading remapped rows failed: remappedRows: NVML error 15: GPU is lost",
    )
    assert rows.figures["gpus"][2]["remappedRows"] == "not supported"


# ---- no NVML ----


def test_no_profile_means_no_driver(lib_dir: Path, tmp_path: Path) -> None:
    report, _ = health(lib_dir, tmp_path / "absent.profile", tmp_path, "interval")
    assert [r.check for r in report.results] == ["gpu-count"]
    count = report.results[0]
    assert (count.action, count.reason, count.figures["nvmlError"]) == (
        "replace-machine",
        "NVML unavailable: nvmlInit: NVML error 9: Driver Not Loaded",
        9,
    )
    skipped = {s.check: s.reason for s in report.skipped}
    assert {c: skipped[c] for c in set(GPU_CHECKS) - {"gpu-count"}} == {
        c: ("NVML unavailable (see gpu-count)" if c != "gpu-idle" else "interval runs while jobs may use the GPUs")
        for c in set(GPU_CHECKS) - {"gpu-count"}
    }


def test_a_profile_line_it_cannot_read_fails_init_and_says_where(lib_dir: Path, tmp_path: Path) -> None:
    profile = tmp_path / "node.profile"
    profile.write_text(profile_text(gpus=1) + "gpu 0 eccMdoe 1 1\n", encoding="utf-8")
    script = "import json, pynvml\ntry:\n    pynvml.nvmlInit()\n    print(0)\nexcept pynvml.NVMLError as e:\n    print(e.value)\n"
    proc = subprocess.run(
        [sys.executable, "-c", script], env=child_env(lib_dir, profile), capture_output=True, text=True, check=False
    )
    assert proc.stdout.strip() == "999"
    lines = profile_text(gpus=1).count("\n") + 1
    assert f"nvml stand-in: {profile}:{lines}: cannot read this line" in proc.stderr


# ---- NVML that never answers: the checks' child abandoned ----


def test_a_gpu_whose_nvml_never_answers_fails_its_check_and_keeps_the_gpus_fingerprint(
    lib_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    healthy, _ = health(
        lib_dir, write_profile(tmp_path / "node.profile"), tmp_path, "interval", "--state-dir", str(state)
    )
    assert healthy.ok and healthy.fingerprint.kind == "gpu-uuids"
    profile = write_profile(tmp_path / "node.profile", faults={2: ["hang-nvmlDeviceGetTotalEccErrors"]})
    began = time.monotonic()
    report, err = health(
        lib_dir, profile, tmp_path, "interval", "--nvml-call-limit", "2", "--deadline", "28", "--state-dir", str(state)
    )
    assert time.monotonic() - began < 30  # the run ended although the call on GPU 2 never returned
    results = gpu_results(report)
    assert results["gpu-count"].ok
    ecc = results["gpu-ecc"]
    assert (ecc.action, ecc.reason, ecc.figures["callSeconds"] >= 2) == (
        "replace-machine",
        "GPU 2: NVML eccErrors.uncorrected.volatile did not answer within 2 s: the GPU or its driver has stopped answering",
        True,
    )
    assert [r.check for r in report.results] == ["gpu-count", "gpu-ecc"]
    skipped = {s.check: s.reason for s in report.skipped}
    assert skipped["gpu-remapped-rows"] == "not run: GPU 2: NVML eccErrors.uncorrected.volatile is stuck"
    assert (report.action, report.exit_code) == ("replace-machine", EXIT_CODES["replace-machine"])
    assert report.fingerprint == healthy.fingerprint  # from the earlier run: NVML is not asked again
    assert err.strip() == f"slonk-health interval: gpu-ecc: replace-machine: {ecc.reason}"


def test_nvml_initialisation_that_never_answers_is_gpu_count_s_failure(lib_dir: Path, tmp_path: Path) -> None:
    profile = tmp_path / "node.profile"
    profile.write_text(profile_text() + "hang nvmlInitWithFlags\n", encoding="utf-8")
    report, _ = health(lib_dir, profile, tmp_path, "prolog", "--nvml-call-limit", "1")
    [count] = report.results
    assert (count.check, count.action) == ("gpu-count", "replace-machine")
    assert count.reason.startswith("NVML initialisation did not answer within 1 s")


def test_nvml_stuck_in_its_shutdown_replaces_gpu_count_s_pass(lib_dir: Path, tmp_path: Path) -> None:
    profile = tmp_path / "node.profile"
    profile.write_text(profile_text() + "hang nvmlShutdown\n", encoding="utf-8")
    report, _ = health(lib_dir, profile, tmp_path, "interval", "--nvml-call-limit", "1")
    checks = [r.check for r in report.results]
    assert len(checks) == len(set(checks)) == 6  # every GPU check once; gpu-count's pass replaced
    count = gpu_results(report)["gpu-count"]
    assert (count.action, report.action) == ("replace-machine", "replace-machine")
    assert count.reason.startswith("NVML shutdown did not answer within 1 s")


def test_while_an_earlier_call_is_stuck_nvml_is_not_asked_again(lib_dir: Path, tmp_path: Path) -> None:
    # The earlier run's child, still in the kernel, is a process of ours here; NVML itself would hang in
    # its init for the whole call limit, so a run that asked it again would take a minute.
    state = tmp_path / "state"
    healthy, _ = health(
        lib_dir, write_profile(tmp_path / "node.profile"), tmp_path, "interval", "--state-dir", str(state)
    )
    earlier = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        NodeState(state).record_stuck(earlier.pid, time.time(), "GPU 2: NVML eccErrors did not answer within 15 s")
        profile = tmp_path / "node.profile"
        profile.write_text(profile_text() + "hang nvmlInitWithFlags\n", encoding="utf-8")
        began = time.monotonic()
        report, _ = health(lib_dir, profile, tmp_path, "interval", "--nvml-call-limit", "60", "--state-dir", str(state))
        assert time.monotonic() - began < 30
    finally:
        earlier.kill()
        earlier.wait()
    [count] = report.results
    assert (count.check, count.action) == ("gpu-count", "replace-machine")
    assert f"an earlier run's call has not returned (pid {earlier.pid}): GPU 2: NVML eccErrors" in count.reason
    assert report.fingerprint == healthy.fingerprint and report.fingerprint.kind == "gpu-uuids"
    assert {s.check for s in report.skipped if s.reason.startswith("not run: NVML is still stuck")} == set(
        GPU_CHECKS
    ) - {"gpu-count"}


def test_a_run_that_ends_in_time_is_untouched_by_its_limits(lib_dir: Path, tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "node.profile")
    report, err = health(lib_dir, profile, tmp_path, "interval", "--deadline", "20", "--nvml-call-limit", "10")
    assert report.ok and err == ""
    assert all("gaveUpAfterSeconds" not in r.figures for r in report.results)


# ---- the Python side ----


def test_build_names_the_packages_when_gcc_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(StandinError, match=r"gcc libc6-dev"):
        build(tmp_path / "out")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"faults": {0: ["ecc-correctable"]}}, "unknown fault 'ecc-correctable'"),
        ({"faults": {7: ["pcie-x8"]}, "missing": 1}, r"GPU 7, but NVML sees GPUs 0\.\.6"),
        ({"missing": 9}, "missing"),
        ({"minors": [0, 1]}, "minors has 2 entries for 8 GPUs"),
    ],
)
def test_profile_refuses_what_it_cannot_make(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(StandinError, match=message):
        profile_text(**kwargs)


def test_the_default_recording_is_the_tests_h100() -> None:
    assert json.loads((DATA / "h100-idle.json").read_text(encoding="utf-8")) == RECORDING


@pytest.mark.parametrize("selection", [("--check", "gpu-ecc"), ("--skip", "gpu-count")])
def test_a_selection_of_gpu_checks_still_opens_nvml(lib_dir: Path, tmp_path: Path, selection: tuple[str, str]) -> None:
    profile = write_profile(tmp_path / "profile", faults={2: ["ecc-uncorrectable"]})
    report, _ = health(lib_dir, profile, tmp_path, "boot", *selection)
    ecc = gpu_results(report)["gpu-ecc"]
    assert not report.ok and not ecc.ok and ecc.action == "replace-machine", report
