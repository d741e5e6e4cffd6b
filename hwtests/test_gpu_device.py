"""On a GPU runner the default device must be the GPU, not the CPU fallback."""

from gpurace.backends import wgpu_backend


def test_default_device_is_a_gpu():
    adapters = wgpu_backend.list_devices()
    assert adapters and adapters[0].is_gpu, [a.description for a in adapters]
    _, name = wgpu_backend.get_device()
    assert name == adapters[0].description
