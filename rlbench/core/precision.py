"""The math precision of the learner's update and of central inference (`precision=`: fp32,
tf32, bf16, fp16): `precision_problem` refuses what a device cannot run fast before any job,
`Amp` runs the networks' forwards under autocast (fp16 with a GradScaler), `published_peak`
holds NVIDIA's dense peaks (for learner_mfu). Torch is imported only where a tensor is touched, so
validating a config stays fast. What stays fp32, and why: docs/precision.md.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
DEFAULT = "fp32"
AUTOCAST = ("bf16", "fp16")  # the precisions applied through torch.autocast
CPU_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}  # /proc/cpuinfo
CUDA_MAJOR = {"tf32": 8, "bf16": 8, "fp16": 7}  # compute capability with tensor cores for it (Volta: fp16)


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (Linux); empty where they cannot be read."""
    try:
        text = Path(path).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def allowed(device_type: str, flags: frozenset[str] = frozenset(), cuda_major: int | None = None) -> list[str]:
    """The precisions a device runs fast: a CPU's by its flags, a GPU's by its compute capability."""
    if device_type == "cuda":
        return ["fp32"] + [p for p in ("tf32", "bf16", "fp16") if (cuda_major or 0) >= CUDA_MAJOR[p]]
    return ["fp32"] + [p for p in ("bf16", "fp16") if flags & set(CPU_FLAGS[p])]


def precision_problem(
    precision: str,
    device_type: str,
    device_name: str,
    flags: frozenset[str] = frozenset(),
    cuda_major: int | None = None,
) -> str | None:
    """Why `precision` is refused on this device (one line naming key, device and what is allowed), or None."""
    ok = allowed(device_type, flags, cuda_major)
    if precision in ok:
        return None
    if device_type == "cuda":
        why = (
            f"needs compute capability >= {CUDA_MAJOR[precision]}.0 for tensor-core {precision}, "
            f"{device_name} has {cuda_major}.x"
        )
    elif precision == "tf32":
        why = "TF32 is a CUDA tensor-core format"
    else:
        why = f"no fast {precision} math on {device_name} (none of the CPU flags {', '.join(CPU_FLAGS[precision])})"
    return f"precision={precision}: {why}; allowed on device {device_type}: {', '.join(ok)}"


def at_least_fp32(x):
    """x in fp32 where autocast made it bf16 or fp16; fp32 and fp64 tensors unchanged."""
    return x.float() if x.is_floating_point() and x.element_size() < 4 else x


class Amp:
    """A job's precision at run time: `autocast()` around a forward, `backward`/`unscale`/`step`
    through fp16's gradient scaler (plain calls otherwise), `scope()` around the job (tf32's flags)."""

    def __init__(self, precision: str = DEFAULT, device_type: str = "cpu"):
        import torch  # lazy: keeps torch off the start

        if precision not in PRECISIONS:
            raise ValueError(f"precision={precision}: allowed: one of {', '.join(PRECISIONS)}")
        self.precision, self.device_type = precision, device_type
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
        self.scaler = torch.amp.GradScaler(device_type) if precision == "fp16" else None

    def autocast(self):
        """torch.autocast to the precision's dtype (bf16, fp16); a no-op for fp32 and tf32."""
        import torch  # lazy: keeps torch off the start

        if self.precision not in AUTOCAST:
            return nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def backward(self, loss) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def unscale(self, optimizer) -> None:
        """Before clipping: the gradients back at their true size (fp16's scaler)."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer) -> None:
        """The optimizer's step; with fp16's scaler, skipped where a gradient overflowed."""
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)
        self.scaler.update()

    @contextmanager
    def scope(self, backends=None):
        """tf32: TF32 matmuls and convolutions on CUDA while the job runs, restored after."""
        if self.precision != "tf32":
            yield
            return
        import torch  # lazy: keeps torch off the start

        b = backends or torch.backends
        saved = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = True, True
        try:
            yield
        finally:
            b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = saved


# Dense (no sparsity) peak TFLOP/s NVIDIA publishes per precision, matched by the name torch
# gives the device (first match wins; the SXM figures for "H100" without "PCIe"); fp32 is the
# CUDA cores' non-tensor rate. Sources: the H100, H200, A100, L4, L40S and V100 datasheets.
PUBLISHED_PEAK_TFLOPS: list[tuple[str, dict[str, float]]] = [
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}),
    ("H100", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    ("H200", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    ("A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 366.0, "fp16": 366.0}),
    ("L4", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    ("V100", {"fp32": 15.7, "fp16": 125.0}),
]


def published_peak(device_name: str, precision: str) -> tuple[float, str] | None:
    """(TFLOP/s, its source) NVIDIA publishes for `device_name` at `precision`, or None (a CPU,
    an unlisted GPU, a precision it has no figure for)."""
    for key, peaks in PUBLISHED_PEAK_TFLOPS:
        if key.lower() in device_name.lower():
            if precision in peaks:
                return peaks[precision], f"published: NVIDIA {key} datasheet, dense {precision}"
            return None
    return None
