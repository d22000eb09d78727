# Everything a newcomer runs. Each target creates/updates the virtual environment it needs.
PYTHON ?= python3.11
BPY_VERSION ?= 5.0.1
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-bpy-$(BPY_VERSION)
PYTEST_ARGS ?=

.PHONY: venv demo test test-core test-blender bench extension clean

venv: $(STAMP)

$(STAMP): requirements-dev.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 (python3.11 python3.11-venv) or run make PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements-dev.txt "bpy==$(BPY_VERSION)"
	rm -f $(VENV)/.installed-bpy-*
	touch $@

## The main job: headless simulate-and-bake of a sample scene, plus a preview image.
demo: venv
	$(VPY) tools/demo.py

## All tests (engine on the CPU OpenCL device, and the Blender layer with the bpy module).
test: venv
	$(VPY) -m pytest tests $(PYTEST_ARGS)

test-core: venv
	$(VPY) -m pytest tests/core $(PYTEST_ARGS)

test-blender: venv
	$(VPY) -m pytest tests/blender $(PYTEST_ARGS)

bench: venv
	$(VPY) bench/engine_bench.py

clean:
	rm -rf $(VENV) out dist .pytest_cache
