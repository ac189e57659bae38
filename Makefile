# The two commands users type:  make testbed up && harness run vm-scaling   |   make test
SHELL := /bin/bash
VENV := $(CURDIR)/.venv
HARNESS := $(VENV)/bin/harness
PYTHON ?= python3
LAUNCHER := /usr/local/bin/harness
PYTEST_ARGS ?=
export PYTEST_ARGS   # scripts/tests.sh passes them to pytest

.PHONY: testbed up down test test-all test-times lint bench setup bootstrap all-packages host-packages venv test-tools libvirtd provider image-tools image image-full host-image spdk launcher

# `make testbed up` / `make testbed down` read as one phrase: `testbed` itself does nothing.
testbed:
	@:

# The fleet the main job runs on: vm-scaling's largest VM count (its run then starts at once).
MAIN_JOB_VMS := 4

up: setup
	$(HARNESS) testbed up --set fleet.vms=$(MAIN_JOB_VMS)

# Always leaves a clean host: destroy the fleet, collect every vtb- leftover, stop the libvirtd
# the testbed started (libvirtd is started first if needed, so that domains can be undefined).
down:
	@if [ -x $(HARNESS) ] && command -v libvirtd >/dev/null; then \
	  scripts/libvirtd.sh start && $(HARNESS) testbed down --all; fi
	scripts/libvirtd.sh stop

# The lint gate first (seconds), so that a style or import error fails before any guest boots.
# The tests also boot a nested host (RAID on emulated NVMe): build its image up front.
# `make test` is the `core` tier: every unit test and each plug-in's smallest live test;
# `make test-all` runs the `extended` tier after it (docs/testing.md: what each runs, and how long).
test: test-tools lint bootstrap host-image
	scripts/host-packages.sh --test
	scripts/tests.sh core

test-all: test-tools lint bootstrap host-image
	scripts/host-packages.sh --test
	scripts/tests.sh core extended

# docs/testing.md's measured times, from the JUnit reports the last `make test` and `make test-all` left.
test-times: venv
	$(VENV)/bin/python scripts/test_times.py docs/testing.md

lint: test-tools
	$(VENV)/bin/ruff check harness tests
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/xenon --max-absolute C harness
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/unit/test_layers.py   # no cycle; no layer below config takes it whole

bench: bootstrap host-image
	$(HARNESS) bench --nested --docs docs/benchmarks.md

# What the main job needs: the Terraform provider's build from the start; the guest image's build
# as soon as its own tools are in, beside the other host packages; then the venv and libvirtd
# (each line says its step; each step says its time).
# An experiment or backend that needs more installs it on first use (harness/hosts/packages.py).
SETUP_STEPS := venv libvirtd provider image launcher
setup:
	@$(MAKE) --no-print-directory -j4 $(SETUP_STEPS)

# Everything up front: every experiment's and backend's host packages, the guest image of every
# workload, and SPDK's vhost target.
bootstrap: all-packages
	@$(MAKE) --no-print-directory -j4 $(SETUP_STEPS) image-full spdk

all-packages:
	@scripts/step.sh packages scripts/host-packages.sh --all

host-packages: image-tools
	@scripts/step.sh packages scripts/host-packages.sh

# What images/build.sh runs (mmdebstrap, mkfs.ext4, qemu-img): installed first, so that the image,
# the longest step, starts while apt installs the rest (the image's build has its own dpkg).
image-tools:
	@scripts/step.sh image-tools scripts/host-packages.sh --packages mmdebstrap e2fsprogs qemu-utils

# The harness and what it runs with; the test and lint tools only for `make test`, `make lint`.
venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml | host-packages
	@scripts/step.sh venv sh -c 'echo "the harness and its Python libraries (pip)"; \
	  $(PYTHON) -m venv $(VENV) && $(VENV)/bin/pip install -q -e .'
	@touch $@

test-tools: $(VENV)/.test-tools
$(VENV)/.test-tools: $(VENV)/.installed
	@scripts/step.sh test-tools sh -c 'echo "pytest, ruff and the lint gates (pip)"; $(VENV)/bin/pip install -q -e ".[test]"'
	@touch $@

libvirtd: host-packages
	@scripts/step.sh libvirtd scripts/libvirtd.sh start

# Not after the host packages: a Go build needs none of them (scripts/provider.sh installs what it
# needs itself), so it starts with the first command and the apt step runs beside it.
provider:
	@scripts/step.sh provider scripts/provider.sh

image: image-tools
	@scripts/step.sh image images/build.sh

# The guest image of every workload (a fleet whose guests need more than fio builds it on first use).
image-full: host-packages
	@scripts/step.sh image-full images/build.sh guest-full

# SPDK's vhost target (vhost-user-blk-spdk), from ../shared/vendor or $$VTB_SPDK_SOURCE: cached by
# recipe and source; without a source the backend is listed as unavailable, with the fix.
spdk: host-packages
	@scripts/step.sh spdk scripts/spdk.sh --optional

# The nested host's image (`harness host nested up` also builds it when missing).
host-image: host-packages
	images/build.sh host

# A launcher on PATH, so a new login shell finds `harness`.
launcher: venv
	@printf '#!/bin/sh\nexec %s "$$@"\n' '$(HARNESS)' > $(LAUNCHER).tmp && chmod +x $(LAUNCHER).tmp && mv $(LAUNCHER).tmp $(LAUNCHER)
