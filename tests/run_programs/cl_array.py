"""pyopencl.array arithmetic: pyopencl's own elementwise kernels, given Array arguments."""

import numpy as np
import pyopencl.array as cla
from clgpu import digest, queue

q = queue()
a = cla.to_device(q, np.arange(1000, dtype=np.float32))
print(f"array: sha {digest((a * 2 + a).get())}")
