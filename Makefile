# Everything a newcomer runs. Each target creates/updates the virtual environment it needs.
PYTHON ?= python3.11
BPY_VERSION ?= 5.0.1
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-bpy-$(BPY_VERSION)
PYTEST_ARGS ?=

.PHONY: scenes venv bench-venv demo test test-core test-gpu test-blender test-blender-versions compare-baseline bench bench-keys bench-convert bench-vs-blender extension gui-test test-real-blender clean

venv: $(STAMP)

# numpy as each bpy release was tested with (constraints.txt pins the rest)
NUMPY_VERSION_5.0.1 := 1.26.4
NUMPY_VERSION_4.5.15 := 1.26.4
NUMPY_VERSION_4.2.23 := 2.4.6
NUMPY_VERSION ?= $(NUMPY_VERSION_$(BPY_VERSION))

# The install step is the only one that uses the network: it also fills .cache/wheels with the
# wheels of the extension zip for this machine, which tests/blender/test_extension.py builds offline.
$(STAMP): requirements-dev.txt constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 (python3.11 python3.11-venv) or run make PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -c constraints.txt -r requirements-dev.txt "bpy==$(BPY_VERSION)" $(if $(NUMPY_VERSION),"numpy==$(NUMPY_VERSION)")
	$(VPY) tools/build_extension.py --fetch-only --platform linux-x64 --python $$($(VPY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	rm -f $(VENV)/.installed-bpy-*
	touch $@

## The benchmarks' chart library (matplotlib) on top of the test environment.
BENCH_STAMP := $(VENV)/.installed-bench
bench-venv: $(BENCH_STAMP)

$(BENCH_STAMP): requirements-bench.txt $(STAMP)
	$(VPY) -m pip install -q -r requirements-bench.txt
	touch $@

## The main job: headless simulate-and-bake of a sample scene, plus a preview image.
demo: venv
	$(VPY) tools/demo.py

## All tests (engine on the CPU OpenCL device, and the Blender layer with the bpy module).
test: venv
	$(VPY) -m pytest tests $(PYTEST_ARGS)

test-core: venv
	$(VPY) -m pytest tests/core $(PYTEST_ARGS)

## The engine tests on a GPU, recorded with the machine (JSON + log): tests/core on the device, its
## trajectories against the NumPy reference, two runs bit-identical (tools/gpu_tests.py).
## GPU_DEVICE=cpu is a dry run on the CPU. On the lent NVIDIA machine: bash tools/gpu_tests.sh.
GPU_DEVICE ?= gpu
GPU_TESTS_OUT ?= out/gpu_tests.json
## pytest runs side by side (tools/gpu_tests.py --jobs): 4 on the lent 16-core machine
GPU_JOBS ?= 1
test-gpu: venv
	$(VPY) tools/gpu_tests.py --device $(GPU_DEVICE) --jobs $(GPU_JOBS) --out $(GPU_TESTS_OUT)

test-blender: venv
	$(VPY) -m pytest tests/blender $(PYTEST_ARGS)

## Test the Blender layer under the other supported bpy releases (each in its own venv).
test-blender-versions:
	$(MAKE) test-blender BPY_VERSION=4.2.23 VENV=.venv-bpy4.2
	$(MAKE) test-blender BPY_VERSION=4.5.15 VENV=.venv-bpy4.5

## Bit-identity against an earlier commit (COMMIT, default 6d0605e: before the kernels were split by
## stage): core engine scenes and every sample scene's baked keys. COMPARE_ARGS, e.g. "--frames 0".
COMMIT ?= 6d0605e
COMPARE_ARGS ?=
compare-baseline: venv
	$(VPY) tools/compare_with_commit.py --commit $(COMMIT) --blender $(COMPARE_ARGS)

## Regenerate sample_scenes/*.blend with the oldest supported Blender (bpy 4.2), so that every
## supported version can open them (files saved by 5.0 do not open in 4.x).
scenes:
	$(MAKE) venv BPY_VERSION=4.2.23 VENV=.venv-bpy4.2
	PYTHONPATH=. .venv-bpy4.2/bin/python sample_scenes/generate.py

## Benchmarks: figures to JSON under out/ (never timed tests).
bench: venv
	$(VPY) bench/engine_bench.py

bench-keys: venv
	$(VPY) bench/bake_keys_bench.py

bench-convert: venv
	$(VPY) bench/convert_bench.py

## Ours against Blender's rigid bodies (Bullet) on this machine: JSON and chart. BENCH_ARGS, e.g.
## "--sizes 100 1000 --frames 60" (bench/vs_blender_README.md lists the options).
BENCH_ARGS ?=
bench-vs-blender: bench-venv
	PYTHONPATH=. $(VPY) bench/vs_blender.py $(BENCH_ARGS)

## The installable extension zip(s) with the wheels they need, in dist/.
extension: venv
	$(VPY) tools/build_extension.py --split-platforms

## Real Blender 4.3 window under Xvfb (root, Debian 12; the first run builds a chroot, ~5 min).
## GUI_OPENCL=debian-pocl (Debian's pocl-opencl-icd in that Blender), bundled (only the extension's
## own PoCL; fails in distribution Blenders, see tests/gui/README.md) or workaround (diagnostic).
GUI_OPENCL ?= debian-pocl
GUI_SCREENSHOTS ?= 0
gui-test: venv
	PRB_GUI_OPENCL=$(GUI_OPENCL) PRB_SCREENSHOTS=$(GUI_SCREENSHOTS) tests/gui/run_gui_test.sh

## The headless routes in a real Blender binary: Debian trixie's Blender 4.3 (root, Debian 12; the first
## run builds a chroot with Debian's PoCL, ~5 min): blender --command particle_bodies, --python addon/cli.py,
## exit codes, error lines, output files and their keys. Logs: out/real-blender/.
test-real-blender: venv
	tests/real_blender/run_cli_test.sh

clean:
	rm -rf $(VENV) out dist .pytest_cache
