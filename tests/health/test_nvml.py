"""The NVML layer: the live backend's handling of pynvml (with a stand-in module), recording and replay."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from slonk_infra.health import nvml_live
from slonk_infra.health.nvml import FORMAT, Nvml, NvmlError, RecordingBackend, ReplayBackend


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def fake_pynvml(**calls: Callable[..., Any]) -> types.ModuleType:
    """A stand-in for ``pynvml`` holding only what a test needs."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    mod.nvmlMemory_v2 = 0x02000028  # type: ignore[attr-defined]
    mod.nvmlInit = lambda: None  # type: ignore[attr-defined]
    mod.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: f"handle{i}"  # type: ignore[attr-defined]
    for name, fn in calls.items():
        setattr(mod, name, fn)
    return mod


def raises(code: int) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise FakeNVMLError(code)

    return fn


def live(monkeypatch: pytest.MonkeyPatch, **calls: Callable[..., Any]) -> Nvml:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(**calls))
    return Nvml(nvml_live.LiveBackend())


def test_missing_bindings_mean_library_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    with pytest.raises(NvmlError) as info:
        nvml_live.LiveBackend()
    assert info.value.code == 12 and "nvidia-ml-py" in info.value.message


def test_init_failure_keeps_nvmls_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(nvmlInit=raises(9)))
    with pytest.raises(NvmlError) as info:
        nvml_live.LiveBackend()
    assert (info.value.code, info.value.call) == (9, "nvmlInit")


def test_calls_are_converted_to_plain_values(monkeypatch: pytest.MonkeyPatch) -> None:
    mem = types.SimpleNamespace(total=80 << 30, reserved=480 << 20, used=0)
    nvml = live(
        monkeypatch,
        nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetMemoryInfo=lambda h, version=None: mem,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=7, usedGpuMemory=None)],
        nvmlDeviceGetEccMode=lambda h: (1, 0),
        nvmlDeviceGetRemappedRows=lambda h: (0, 2, 1, 0),
    )
    assert nvml.name(0) == "NVIDIA H100 80GB HBM3"
    assert nvml.memory(0) == {"total": 80 << 30, "reserved": 480 << 20, "used": 0}
    assert nvml.compute_processes(0) == [(7, None)]
    assert nvml.ecc_mode(0) == (True, False)
    assert nvml.remapped_rows(0) == (0, 2, True, False)


def test_older_drivers_fall_back_to_the_older_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    def memory(handle: Any, version: Any = None) -> Any:
        if version is not None:
            raise FakeNVMLError(13)  # nvmlDeviceGetMemoryInfo_v2 missing
        return types.SimpleNamespace(total=16 << 30, used=1 << 20)

    nvml = live(
        monkeypatch,
        nvmlDeviceGetMemoryInfo=memory,
        nvmlDeviceGetCurrentClocksEventReasons=raises(13),
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x40,
    )
    assert nvml.memory(0) == {"total": 16 << 30, "reserved": None, "used": 1 << 20}
    assert nvml.clock_event_reasons(0) == 0x40


def test_nvml_errors_carry_the_code_and_the_value_read(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = live(monkeypatch, nvmlDeviceGetRemappedRows=raises(15))
    with pytest.raises(NvmlError) as info:
        nvml.remapped_rows(0)
    assert (info.value.code, info.value.call) == (15, "remappedRows")


class FakeEvents:
    """nvmlEventSet* and nvmlDeviceRegisterEvents over a queue of (index, type, data)."""

    def __init__(self, queue: list[tuple[int, int, int]], register: Callable[[int], None] | None = None) -> None:
        self.queue = list(queue)
        self.registered: dict[int, int] = {}
        self.freed = False
        self.register = register

    def calls(self) -> dict[str, Callable[..., Any]]:
        def reg(handle: str, mask: int, es: Any) -> None:
            index = int(handle.removeprefix("handle"))
            if self.register:
                self.register(index)
            self.registered[index] = mask

        def wait(es: Any, timeout_ms: int) -> Any:
            assert timeout_ms > 0
            if not self.queue:
                raise FakeNVMLError(10)
            index, kind, data = self.queue.pop(0)
            return types.SimpleNamespace(device=f"handle{index}", eventType=kind, eventData=data)

        def free(es: Any) -> None:
            self.freed = True

        return {
            "nvmlEventSetCreate": lambda: object(),
            "nvmlDeviceRegisterEvents": reg,
            "nvmlEventSetWait": wait,
            "nvmlEventSetFree": free,
            "nvmlDeviceGetIndex": lambda h: int(h.removeprefix("handle")),
        }


def test_events_are_collected_until_the_wait_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeEvents([(1, 0x8, 79), (0, 0x2, 0)])
    nvml = live(monkeypatch, **fake.calls())
    events = nvml.wait_events({0: 0xA, 1: 0xA, 2: 0}, timeout_ms=200)
    assert [(e.device, e.event_type, e.data) for e in events] == [(1, 0x8, 79), (0, 0x2, 0)]
    assert fake.registered == {0: 0xA, 1: 0xA} and fake.freed


def test_events_not_supported_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(index: int) -> None:
        raise FakeNVMLError(3)

    fake = FakeEvents([], register=refuse)
    nvml = live(monkeypatch, **fake.calls())
    with pytest.raises(NvmlError) as info:
        nvml.wait_events({0: 0xA}, timeout_ms=50)
    assert info.value.not_supported and fake.freed


def test_one_gpu_refusing_events_does_not_silence_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse_first(index: int) -> None:
        if index == 0:
            raise FakeNVMLError(3)

    fake = FakeEvents([(1, 0x8, 48)], register=refuse_first)
    nvml = live(monkeypatch, **fake.calls())
    assert [e.data for e in nvml.wait_events({0: 0xA, 1: 0xA}, timeout_ms=50)] == [48]


def test_recording_then_replaying_gives_the_same_answers_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml_calls: dict[str, Callable[..., Any]] = {
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetUUID": lambda h: "GPU-1",
        "nvmlDeviceGetRemappedRows": raises(3),
    }
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(**nvml_calls))
    recorder = RecordingBackend(nvml_live.LiveBackend())
    recorded = Nvml(recorder)
    assert (recorded.device_count(), recorded.uuid(0)) == (1, "GPU-1")
    with pytest.raises(NvmlError):
        recorded.remapped_rows(0)
    rec = recorder.recording()
    assert rec["format"] == FORMAT
    replayed = Nvml(ReplayBackend(rec))
    assert (replayed.device_count(), replayed.uuid(0)) == (1, "GPU-1")
    with pytest.raises(NvmlError) as info:
        replayed.remapped_rows(0)
    assert info.value.code == 3


def test_replay_refuses_other_formats_and_missing_answers() -> None:
    with pytest.raises(ValueError, match="format"):
        ReplayBackend({"format": "other"})
    replay = Nvml(ReplayBackend({"format": FORMAT, "init": {"error": None}, "system": {}, "devices": {"0": {}}}))
    with pytest.raises(KeyError, match="uuid"):
        replay.uuid(0)
