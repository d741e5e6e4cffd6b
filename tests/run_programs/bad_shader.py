"""A program whose kernel does not compile: wgpu raises into the program."""

from gpu import device

dev = device()
print("compiling")
dev.create_shader_module(code="@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }")
print("not reached")
