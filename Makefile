# The two commands users type:  make testbed up && harness run vm-scaling   |   make test
SHELL := /bin/bash
VENV := $(CURDIR)/.venv
HARNESS := $(VENV)/bin/harness
PYTHON ?= python3
LAUNCHER := /usr/local/bin/harness
PYTEST_ARGS ?=

.PHONY: testbed up down test lint bench bootstrap host-packages venv libvirtd provider image host-image spdk launcher

# `make testbed up` / `make testbed down` read as one phrase: `testbed` itself does nothing.
testbed:
	@:

up: bootstrap
	$(HARNESS) testbed up

# Always leaves a clean host: destroy the fleet, collect every vtb- leftover, stop the libvirtd
# the testbed started (libvirtd is started first if needed, so that domains can be undefined).
down:
	@if [ -x $(HARNESS) ] && command -v libvirtd >/dev/null; then \
	  scripts/libvirtd.sh start && $(HARNESS) testbed down --all; fi
	scripts/libvirtd.sh stop

# The lint gate first (seconds), so that a style or import error fails before any guest boots.
# The tests also boot a nested host (RAID on emulated NVMe): build its image up front.
# Two lanes at once (tests/conftest.py says which and why), then the tests marked `alone`, one at a
# time; both parts always run, and either failing fails the target (5: no test selected by PYTEST_ARGS).
# The lanes hand their last two nested hosts over to the alone phase, which removes them (tests/conftest.py).
test: venv lint bootstrap host-image
	scripts/host-packages.sh --test
	VTB_TEST_NESTED_HOSTS=hand-over $(VENV)/bin/pytest -n 2 --dist loadgroup -m "not alone" $(PYTEST_ARGS); lanes=$$?; \
	VTB_TEST_NESTED_HOSTS=take-over $(VENV)/bin/pytest -m alone $(PYTEST_ARGS); alone=$$?; \
	for rc in $$lanes $$alone; do [ $$rc -eq 0 ] || [ $$rc -eq 5 ] || exit $$rc; done

lint: venv
	$(VENV)/bin/ruff check harness tests
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/xenon --max-absolute C harness

bench: bootstrap host-image
	$(HARNESS) bench --nested --docs docs/benchmarks.md

bootstrap: host-packages venv libvirtd provider image spdk launcher

host-packages:
	scripts/host-packages.sh

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml | host-packages
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

libvirtd: host-packages
	scripts/libvirtd.sh start

provider:
	scripts/provider.sh

image: host-packages
	images/build.sh

# SPDK's vhost target (vhost-user-blk-spdk), from ../shared/vendor or $$VTB_SPDK_SOURCE: cached by
# recipe and source; without a source the backend is listed as unavailable, with the fix.
spdk: host-packages
	scripts/spdk.sh --optional

# The nested host's image (`harness host nested up` also builds it when missing).
host-image: host-packages
	images/build.sh host

# A launcher on PATH, so a new login shell finds `harness`.
launcher: venv
	@printf '#!/bin/sh\nexec %s "$$@"\n' '$(HARNESS)' > $(LAUNCHER).tmp && chmod +x $(LAUNCHER).tmp && mv $(LAUNCHER).tmp $(LAUNCHER)
