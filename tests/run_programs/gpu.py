"""Plain wgpu helpers the test programs share (nothing here knows about gpurace)."""

from __future__ import annotations

import hashlib

import numpy as np
import wgpu

STORAGE = wgpu.BufferUsage.STORAGE


def device() -> wgpu.GPUDevice:
    return wgpu.gpu.request_adapter_sync().request_device_sync()


def auto_pipeline(dev: wgpu.GPUDevice, source: str, entry: str) -> wgpu.GPUComputePipeline:
    module = dev.create_shader_module(code=source)
    return dev.create_compute_pipeline(
        layout="auto", compute={"module": module, "entry_point": entry}
    )


def bind(
    dev: wgpu.GPUDevice, pipeline: wgpu.GPUComputePipeline, buffers: dict
) -> wgpu.GPUBindGroup:
    """A bind group for group 0 of an "auto" pipeline: {binding: buffer}."""
    return dev.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[{"binding": b, "resource": {"buffer": buf}} for b, buf in buffers.items()],
    )


def read(dev: wgpu.GPUDevice, buf: wgpu.GPUBuffer, dtype: str = "<u4") -> np.ndarray:
    return np.frombuffer(dev.queue.read_buffer(buf), dtype).copy()


def digest(arr: np.ndarray) -> str:
    return hashlib.sha256(arr.tobytes()).hexdigest()[:16]
