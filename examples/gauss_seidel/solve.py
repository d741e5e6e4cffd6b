"""A small wgpu program: a coarsest-level red-black Gauss-Seidel solve and its residual.

    python solve.py --version storage     # iterate exchanged through a storage buffer
    python solve.py --version workgroup   # the fix: iterate in var<workgroup>

Smooths -u'' = f on 514 nodes (u = 0 at both ends) with `--cycles` rounds of
`--sweeps` red-black sweeps by one 256-invocation work-group, then computes the
residual with a second kernel, and prints checksums of the result (a smoother:
the residual of a rough first guess drops fast, the smooth error stays). Nothing in it
knows about gpurace: `gpurace run -- python solve.py ...` checks it as it is.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np
import wgpu

HERE = Path(__file__).parent
NODES = 514  # 2 x 256 interior points + 2 boundary nodes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", choices=["storage", "workgroup"], default="workgroup")
    ap.add_argument("--sweeps", type=int, default=20)
    ap.add_argument("--cycles", type=int, default=2)
    args = ap.parse_args()

    device = wgpu.gpu.request_adapter_sync().request_device_sync()
    usage = wgpu.BufferUsage
    h = 1.0 / (NODES - 1)
    x = np.linspace(0.0, 1.0, NODES)
    f = (np.pi**2 * np.sin(np.pi * x)).astype(np.float32)
    params = np.zeros(4, np.uint32)
    params[0] = args.sweeps
    params[1:2].view(np.float32)[0] = h * h

    f_buf = device.create_buffer_with_data(data=f, usage=usage.STORAGE)
    # a rough first guess (zero at both ends): the smoother removes its wiggles
    u0 = np.random.default_rng(7).random(NODES).astype(np.float32)
    u0[[0, -1]] = 0.0
    r0 = f[1:-1] - (2.0 * u0[1:-1] - u0[:-2] - u0[2:]) / (h * h)
    u_buf = device.create_buffer_with_data(data=u0, usage=usage.STORAGE | usage.COPY_SRC)
    r_buf = device.create_buffer(size=4 * NODES, usage=usage.STORAGE | usage.COPY_SRC)
    p_buf = device.create_buffer_with_data(data=params, usage=usage.UNIFORM)

    # The smoother with an explicit layout, the residual with layout="auto".
    smooth_src = (HERE / f"gs_{args.version}.wgsl").read_text()
    entries = [
        {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
        for i, t in enumerate(["read-only-storage", "storage", "uniform"])
    ]
    layout = device.create_bind_group_layout(entries=entries)
    smooth = device.create_compute_pipeline(
        layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
        compute={"module": device.create_shader_module(code=smooth_src), "entry_point": "relax"},
    )
    smooth_bg = device.create_bind_group(
        layout=layout,
        entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
            for i, b in enumerate([f_buf, u_buf, p_buf])
        ],
    )
    resid_src = (HERE / "residual.wgsl").read_text()
    resid = device.create_compute_pipeline(
        layout="auto",
        compute={"module": device.create_shader_module(code=resid_src), "entry_point": "residual"},
    )
    resid_bg = device.create_bind_group(
        layout=resid.get_bind_group_layout(0),
        entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
            for i, b in zip([0, 1, 2, 3], [f_buf, u_buf, p_buf, r_buf], strict=True)
        ],
    )

    for _ in range(args.cycles):
        enc = device.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(smooth)
        cp.set_bind_group(0, smooth_bg)
        cp.dispatch_workgroups(1)
        cp.set_pipeline(resid)
        cp.set_bind_group(0, resid_bg)
        cp.dispatch_workgroups((NODES - 2 + 63) // 64)
        cp.end()
        device.queue.submit([enc.finish()])

    u = np.frombuffer(device.queue.read_buffer(u_buf), np.float32)
    r = np.frombuffer(device.queue.read_buffer(r_buf), np.float32)
    print(f"version {args.version}: {args.cycles} x {args.sweeps} sweeps")
    print(f"sum(u) = {float(u.astype(np.float64).sum()):.9g}")
    print(f"|r|_inf = {float(np.abs(r).max()):.9g} (first guess: {float(np.abs(r0).max()):.9g})")
    print(f"sha256(u) = {hashlib.sha256(u.tobytes()).hexdigest()[:16]}")


if __name__ == "__main__":
    main()
