# Two commands do everything (see README):
#   make demo   set up a small environment (inferstack and its AWS extra), then plan a sample workload on all four
#               clouds and preview its AWS resources (no credentials)
#   make test   set up (system packages too), then run the whole suite and the benchmarks
# Every environment installs the exact, hashed pins of a lock file in requirements/ (`make lock` writes them from
# pyproject.toml's ranges), then inferstack itself without dependencies.
.PHONY: demo test setup demo-setup system-packages lint unit provider-tests policy-setup policy-tests benchmarks lock \
	clean

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_VENV ?= .venv-demo
DEMO_BIN := $(DEMO_VENV)/bin
WORKLOAD ?= examples/workloads/chat-8b-public.yaml

# pip, not uv, installs: it comes with Python. --require-hashes: each file is the one locked.
LOCKED_INSTALL := pip install --quiet --require-hashes --no-deps -r
EDITABLE_INSTALL := pip install --quiet --no-deps --no-build-isolation -e .

demo: demo-setup
	$(DEMO_BIN)/inferstack plan $(WORKLOAD)
	$(DEMO_BIN)/inferstack preview $(WORKLOAD) --cloud aws

demo-setup: $(DEMO_BIN)/.installed

$(DEMO_BIN)/.installed: pyproject.toml requirements/demo.lock
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_BIN)/$(LOCKED_INSTALL) requirements/demo.lock
	$(DEMO_BIN)/$(EDITABLE_INSTALL)
	$(DEMO_BIN)/python -m compileall -q inferstack
	touch $@

test: system-packages setup lint unit provider-tests policy-tests benchmarks

setup: $(BIN)/.installed

$(BIN)/.installed: pyproject.toml requirements/dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/$(LOCKED_INSTALL) requirements/dev.lock
	$(BIN)/$(EDITABLE_INSTALL)
	$(BIN)/python -m compileall -q inferstack  # an editable install is not byte-compiled: ~15 ms per command
	touch $@

# Tools the checks run for real: shellcheck, cloud-init's schema validator, debootstrap and systemd-analyze for
# the boot test (which builds a Debian 12 root file system under .cache/), nginx for the gateway, git for plan diffs;
# the gateway's inference cache: its Lua module and Redis client, and Debian's redis-server (TLS, with openssl's CA).
SYSTEM_PACKAGES := shellcheck cloud-init debootstrap systemd util-linux tar ca-certificates git nginx \
	libnginx-mod-http-lua lua-nginx-redis lua-cjson redis-server redis-tools openssl
system-packages:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing $$missing"; \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

lint: setup
	$(BIN)/ruff check inferstack tests benchmarks tools policy provider
	$(BIN)/mypy

unit: setup
	$(BIN)/python -m pytest

# The Pulumi package (provider/): pulumi's provider server and Google's API clients both define google.rpc.Status,
# so these tests run in a process without the price-refresh SDKs.
provider-tests: setup
	$(BIN)/python -m pytest -o addopts='-ra --strict-markers' tests/provider

# The policy pack's SDK (pulumi-policy) pins protobuf 5, which breaks google-cloud-billing (protobuf 6) in the
# main environment: its tests run in an environment of their own.
POLICY_VENV ?= .venv-policy
POLICY_BIN := $(POLICY_VENV)/bin
policy-setup: $(POLICY_BIN)/.installed

$(POLICY_BIN)/.installed: pyproject.toml requirements/policy.lock
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_BIN)/$(LOCKED_INSTALL) requirements/policy.lock
	$(POLICY_BIN)/$(EDITABLE_INSTALL)
	touch $@

policy-tests: policy-setup
	$(POLICY_BIN)/python -m pytest -o addopts='-ra --strict-markers' tests/policy

benchmarks: setup
	$(BIN)/python benchmarks/fidelity.py
	$(BIN)/python benchmarks/plan_speed.py

# Rewrite the lock files from pyproject.toml (and policy/requirements.txt), keeping every pin that still satisfies
# them; `make lock LOCK_FLAGS=--upgrade` moves each pin to the newest allowed version. One lock serves Python 3.10+
# on every platform (--universal).
UV_VERSION := 0.13.9
LOCK_VENV := .venv-lock
UV := $(LOCK_VENV)/bin/uv
LOCK_FLAGS ?=
COMPILE = $(UV) pip compile --quiet --universal --python-version 3.10 --generate-hashes $(LOCK_FLAGS)

lock: $(UV)
	$(COMPILE) pyproject.toml requirements/build.in --extra dev -o requirements/dev.lock
	$(COMPILE) pyproject.toml requirements/build.in --extra aws -o requirements/demo.lock
	$(COMPILE) pyproject.toml requirements/build.in requirements/policy.in --extra all -o requirements/policy.lock
	$(COMPILE) requirements/ray.in -o requirements/ray.lock

$(UV):
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet uv==$(UV_VERSION)

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(POLICY_VENV) $(LOCK_VENV) .pytest_cache .mypy_cache .ruff_cache
