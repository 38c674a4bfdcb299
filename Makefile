# CostGuard: every target sets itself up (a venv in .venv/) on a fresh machine.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml infra/lambda-constraints.txt | cksum | cut -d' ' -f1)

# jsii (aws-cdk-lib) prints a large banner on Node 20; CI and people do not need it.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: install demo test check lint typecheck unit bench synth clean property calendar docs chromium

#: pytest-xdist workers (`auto`: one per core, 2 on the reference machine). The tests of a
#: module that share an expensive module fixture (the Organization demo, a CDK synth) carry
#: one `xdist_group` (tests/conftest.py), and `--dist loadgroup` runs a group on one worker,
#: so the fixture is built once; session synths are built once per worker.
WORKERS ?= auto
#: pytest, with its rewritten test modules cached in __pycache__ even where the environment
#: sets PYTHONDONTWRITEBYTECODE (as this machine's does): rewriting the asserts of every test
#: module took about 7 s of each worker's collection, on every run.
#: PYTHONPATH: the tests import this checkout's code even where .venv is another checkout's
#: (its editable install points there), e.g. a clone that links a prebuilt venv.
PYTEST := env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=$(CURDIR)/functions:$(CURDIR)/infra:$(CURDIR) $(BIN)/python -m pytest
#: --no-loadscope-reorder: the work units go out in the order tests/conftest.py gives them,
#: the longest first (xdist would otherwise put the groups with most tests first).
PARALLEL := -n $(WORKERS) --dist loadgroup --no-loadscope-reorder
#: mypy's cache lives in the venv: it holds the third-party stubs (boto3-stubs, aws-cdk-lib,
#: pydantic), which change only when the venv does, and a prebuilt venv carries it warm.
MYPY := $(BIN)/mypy --cache-dir $(VENV)/.mypy_cache

# The venv gets exactly the versions the Lambda asset and layer ship (one pin file),
# so the tests run what is deployed.
$(STAMP): pyproject.toml infra/lambda-constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c infra/lambda-constraints.txt -e '.[dev]'
	@echo "warming mypy's cache in $(VENV)/.mypy_cache (once per venv)"
	-@$(MYPY) >/dev/null
	@rm -f $(VENV)/.installed-*
	@touch $@

install: $(STAMP)

## The main job: a whole guard cycle against an embedded AWS (moto server).
demo: $(STAMP)
	$(BIN)/costguard demo

lint: $(STAMP)
	$(BIN)/ruff check functions infra tests benchmarks
	$(BIN)/ruff format --check functions infra tests benchmarks
	PYTHONPATH=functions $(BIN)/lint-imports

typecheck: $(STAMP)
	$(MYPY)

## Everything CI runs: lint, types, the whole test suite (in parallel: WORKERS=1 for serial).
test: lint typecheck chromium
	$(PYTEST) $(PARALLEL)

## The inner loop, under a minute: lint, types (mypy's cache warm), and the unit and
## functional tests, i.e. every test that needs neither moto's HTTP server nor a CDK synth
## (not e2e, not infra), but the slow ones (tests/support/slow.py), the property folder left
## to `make test` and `make property`. `make test` runs them all.
check: lint typecheck
	$(PYTEST) -q $(PARALLEL) -m "not e2e and not infra and not slow" --ignore=tests/property

## Headless Chromium for the report's browser test (tests/report/test_report_in_chromium.py):
## the Debian package, installed once (skipped when /usr/bin/chromium is there). Needs root
## or sudo; without either it says what to run.
CHROMIUM := /usr/bin/chromium
chromium:
	@test -x $(CHROMIUM) || { \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		command -v apt-get >/dev/null || { echo "make chromium: install Chromium at $(CHROMIUM) (no apt-get here)" >&2; exit 2; }; \
		echo "installing chromium (Debian package) for the report's browser test"; \
		$$SUDO apt-get install -y -q chromium >/dev/null 2>&1 || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q chromium >/dev/null; }; \
	}

unit: $(STAMP)
	$(PYTEST) tests/unit

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

## Synthesize the CDK app (no AWS account needed) into cdk.out/, with cdk-nag; context as
## the CDK CLI takes it: make synth CONTEXT="-c orgAccounts=discover -c orgId=o-abc1234567"
synth: $(STAMP)
	$(BIN)/python infra/app.py $(CONTEXT)

## Regenerate docs/configuration.md's table from the settings' one declaration (config_spec.py).
docs: $(STAMP)
	PYTHONPATH=functions $(BIN)/python -m costguard.config_spec docs/configuration.md

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .mypy_cache .ruff_cache

## The properties at full strength: 3 x 5,000 generated cases of the stale-object sweep,
## 250 of simulated days through the act handler (test_sweep_over_days.py), then every other
## Hypothesis test under the "property" profile (tests/support/profiles.py): ten times
## Hypothesis's default examples, and the full count of those `make test` runs few of
## because each example is a whole scan.
property: $(STAMP)
	SWEEP_PROPERTY_EXAMPLES=5000 $(BIN)/python -m pytest -q -p no:cacheprovider tests/property
	HYPOTHESIS_PROFILE=property $(BIN)/python -m pytest -q -p no:cacheprovider $(PARALLEL) \
		-m hypothesis --ignore=tests/property tests

## The demo stories at calendar edges: every test marked `story`, under libfaketime, at a
## month's first minute, a year's last second, and a leap day in a zone far from UTC. The
## story must be the same whatever the wall clock reads. Needs `faketime` (Debian package
## faketime; .ci/run installs it).
CALENDAR_INSTANTS := 2027-03-01T00:00:30 2027-12-31T23:59:59 2028-02-29T23:59:00
calendar: $(STAMP)
	@command -v faketime >/dev/null || { echo "make calendar: needs faketime (apt-get install faketime)" >&2; exit 2; }
	@for at in $(CALENDAR_INSTANTS); do \
		zone=UTC; case $$at in 2028-*) zone=Pacific/Kiritimati;; esac; \
		echo "== the demo stories at $$at UTC (TZ=$$zone)"; \
		TZ=$$zone faketime "$$(TZ=$$zone date -d "$${at}Z" '+%Y-%m-%d %H:%M:%S')" \
			$(PYTEST) $(PARALLEL) -q -p no:cacheprovider -m story || exit 1; \
	done
