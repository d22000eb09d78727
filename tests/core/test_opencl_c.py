"""The kernels are OpenCL C 1.2 without extensions Apple's GPUs lack (macOS ships OpenCL 1.2): the
program is built as such on every device, and the source uses nothing PoCL would build but a Mac
could not."""
import re

import pyopencl as cl
import pytest

from addon.core.device import KERNEL_EXTENSIONS, POCL_PLATFORM
from addon.core.opencl_engine import OpenCLEngine
from addon.core.opencl_program import _COMMENT, KERNEL_DIR, OPENCL_C_STANDARD, STAGES
from bench.scenes import cube_pile

# What needs an extension beyond OpenCL C 1.2 core that PoCL has (so its build passes) and Apple's
# GPUs lack. The pragma names its extension: it must be in device.KERNEL_EXTENSIONS, which the
# device check requires.
PRAGMA = re.compile(r"#\s*pragma\s+OPENCL\s+EXTENSION\s+(\w+)")
NEEDS_EXTENSION = (
    (re.compile(r"\bdouble\d*\b"), "cl_khr_fp64"),
    # an unsuffixed literal is a double where cl_khr_fp64 exists and a float elsewhere: the same
    # source would compute differently on PoCL and on a Mac
    (re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?(?![\w.])|(?<![\w.])\d+[eE][+-]?\d+(?![\w.])"),
     "cl_khr_fp64"),
    (re.compile(r"\batom_\w+"), "cl_khr_int64_base_atomics"),  # 64-bit atomics (32-bit: atomic_*, core)
    (re.compile(r"\bhalf\d*\b"), "cl_khr_fp16"),
)


def extension_uses(source: str) -> list[tuple[int, str, str]]:
    """(line, text, extension) of each use of an extension in OpenCL C source, comments left out."""
    found = []
    code = _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), source)  # keep line numbers
    for number, line in enumerate(code.splitlines(), 1):
        found += [(number, m.group(), m.group(1)) for m in PRAGMA.finditer(line)]
        found += [(number, m.group(), extension) for pattern, extension in NEEDS_EXTENSION
                  for m in pattern.finditer(line)]
    return found


def test_the_program_is_built_as_opencl_c_1_2():
    """The options the engine builds with (tests and users alike) ask for OpenCL C 1.2, the driver
    records them, and they make it reject OpenCL C 2.0."""
    assert OPENCL_C_STANDARD == "-cl-std=CL1.2"
    engine = OpenCLEngine(cube_pile(4))
    assert OPENCL_C_STANDARD in engine.build_options
    device = engine.context.devices[0]
    assert OPENCL_C_STANDARD in engine.program.get_build_info(device, cl.program_build_info.OPTIONS).split()
    # a float the options define is a float literal (a double one needs cl_khr_fp64)
    for option in engine.build_options:
        value = option.partition("=")[2]
        if re.fullmatch(r"[-+]?[\d.]+(?:[eE][-+]?\d+)?f?", value) and re.search(r"[.eE]", value):
            assert value.endswith("f"), option
    c11_atomics = "__kernel void count(__global atomic_int *n) { atomic_fetch_add(n, 1); }"
    if POCL_PLATFORM in engine.device_info.platform_name:
        # PoCL compiles OpenCL C 3.0 unless told: the standard option is what rejects C11 atomics
        cl.Program(engine.context, c11_atomics).build(
            options=[option for option in engine.build_options if option != OPENCL_C_STANDARD])
    with pytest.raises(cl.RuntimeError, match="atomic_int"):
        cl.Program(engine.context, c11_atomics).build(options=list(engine.build_options))


def test_kernels_use_no_extension_beyond_the_allowed_list():
    used = {stage.file: extension_uses((KERNEL_DIR / stage.file).read_text()) for stage in STAGES}
    outside = {file: [use for use in uses if use[2] not in KERNEL_EXTENSIONS] for file, uses in used.items()}
    assert not any(outside.values()), {file: uses for file, uses in outside.items() if uses}


def test_extension_uses_are_found():
    source = """#pragma OPENCL EXTENSION cl_khr_fp64 : enable
    // a comment may say double, 0.5 and atom_add
    __kernel void k(__global double *a, __global long *n, __global half *h) {
        a[0] = 0.5 * a[1] + 1e-3f + 2.5e3;
        atom_add(n, 1L);
        /* none
           here: 1.0 */ float half_turn = 1.0f; atomic_inc((__global int *)n); a[1] = 3.f + .5f;
    }"""
    assert extension_uses(source) == [
        (1, "#pragma OPENCL EXTENSION cl_khr_fp64", "cl_khr_fp64"),
        (3, "double", "cl_khr_fp64"), (3, "half", "cl_khr_fp16"),
        (4, "0.5", "cl_khr_fp64"), (4, "2.5e3", "cl_khr_fp64"),
        (5, "atom_add", "cl_khr_int64_base_atomics"),
    ]
