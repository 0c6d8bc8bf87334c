"""A GPU preset without CUDA fails at once, naming the reason (issue 66, defect 5).

Before: `training_device()` fell back to the CPU whatever the preset, so a Qwen3 GPU preset on a
machine whose driver is too old for the CUDA 13 wheels (or with a CPU torch) trained on the CPU
without a word. Now a GPU preset says `base_model.device: cuda`, and `training_device` refuses
to run it without CUDA: one line with the reason and the driver floor.
"""

from __future__ import annotations

import pytest

from core.params import ParamsError, load

GPU_PRESETS = [name for name in load().presets if name.endswith("gpu")]


def test_every_gpu_preset_declares_that_it_needs_cuda():
    assert GPU_PRESETS
    for name in GPU_PRESETS:
        assert load(preset=name).base_model.device == "cuda", name
    for name in (None, "ci"):  # the tiny world runs wherever torch does
        assert load(preset=name).base_model.device == "auto"


@pytest.mark.parametrize("preset", GPU_PRESETS)
def test_a_gpu_preset_without_cuda_fails_in_one_line_naming_the_driver_floor(preset):
    import torch

    from core.devices import DeviceError, training_device

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(DeviceError) as e:
        training_device(load(preset=preset).base_model.device, preset)
    message = str(e.value)
    assert "\n" not in message and preset in message
    assert "CUDA 13" in message and ">= 580" in message and "torch 2.13" in message
    assert isinstance(e.value, ParamsError)  # core.cli prints it as one line, exit 2
    assert training_device() == torch.device("cpu")  # the tiny world still runs on the CPU


def test_the_reason_names_what_this_machine_lacks(monkeypatch):
    import torch

    from core import devices

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    assert "is a CPU build" in devices.cuda_unavailable_reason()
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert "hides every GPU" in devices.cuda_unavailable_reason()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(devices, "_driver_version", lambda: None)
    assert devices.cuda_unavailable_reason() == "no NVIDIA driver found"
    monkeypatch.setattr(devices, "_driver_version", lambda: "550.54.15")
    assert "550.54.15 is older than 580" in devices.cuda_unavailable_reason()
    with pytest.raises(devices.DeviceError, match="older than 580"):
        devices.require_cuda("qwen3_0p6b_1gpu")
