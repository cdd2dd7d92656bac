# Two commands do everything (see README):
#   make demo   set up, then plan a sample workload on all four clouds and preview its AWS resources (no credentials)
#   make test   set up (system packages too), then run the whole suite and the benchmarks
.PHONY: demo test setup system-packages lint unit provider-tests policy-setup policy-tests benchmarks clean

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
WORKLOAD ?= examples/workloads/chat-8b-public.yaml

demo: setup
	$(BIN)/inferstack plan $(WORKLOAD)
	$(BIN)/inferstack preview $(WORKLOAD) --cloud aws

test: system-packages setup lint unit provider-tests policy-tests benchmarks

setup: $(BIN)/.installed

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m compileall -q inferstack  # an editable install is not byte-compiled: ~15 ms per command
	touch $@

# Tools the checks run for real: shellcheck, cloud-init's schema validator, debootstrap and systemd-analyze for
# the boot test (which builds a Debian 12 root file system under .cache/), nginx for the gateway, git for plan diffs.
SYSTEM_PACKAGES := shellcheck cloud-init debootstrap systemd util-linux tar ca-certificates git nginx
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

$(POLICY_BIN)/.installed: pyproject.toml policy/requirements.txt
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_BIN)/pip install --quiet --upgrade pip
	$(POLICY_BIN)/pip install --quiet -e '.[pulumi]' -r policy/requirements.txt pytest==9.0.3
	touch $@

policy-tests: policy-setup
	$(POLICY_BIN)/python -m pytest -o addopts='-ra --strict-markers' tests/policy

benchmarks: setup
	$(BIN)/python benchmarks/fidelity.py
	$(BIN)/python benchmarks/plan_speed.py

clean:
	rm -rf $(VENV) $(POLICY_VENV) .pytest_cache .mypy_cache .ruff_cache
