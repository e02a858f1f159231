# The README's two commands are `make demo` and `make test`; everything they need is installed here.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Everything installed comes from a lock with hashes (`make lock` writes them from pyproject.toml and the
# .in files): requirements/dev.lock for .venv, requirements/checkov.lock for the template scan, and
# functions/*/requirements.txt for what each Lambda function ships.
DEV_LOCK := requirements/dev.lock
CHECKOV_LOCK := requirements/checkov.lock
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(DEV_LOCK) | sha256sum | cut -c1-12)
CHECKOV_VENV := .venvs/checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-$(shell sha256sum $(CHECKOV_LOCK) | cut -c1-12)
FUNCTIONS := unzip process_pdf ocr_pdf status deliver_callbacks
UV_COMPILE := $(BIN)/uv pip compile --quiet --generate-hashes --custom-compile-command "make lock"
# The functions run CPython 3.13 on Linux; their locks hold the hashes of every wheel (both architectures).
LAMBDA_TARGET := --python-version 3.13 --python-platform linux
# sam build fetches wheels for this architecture: deploy with the same Architecture parameter.
export PDFBATCH_LAMBDA_ARCH ?= arm64
# SAM CLI reports usage to AWS unless told not to; this machine reaches package registries only.
export SAM_CLI_TELEMETRY := 0
# The upload page's browser test drives Debian's Chromium through Playwright (no browser download).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# The OCR lane's engine is the tesserocr wheel (pip, bundles libtesseract); the OCR benchmark also times
# Debian's tesseract command line against it (bench/ocr.py, through pytesseract), and the tests make
# searchable scans with it (`tesseract img out pdf`, as scanners and OCRmyPDF write them).
TESSERACT := /usr/bin/tesseract

.PHONY: demo test lint check-infra lock fast unit integration e2e bench cases docs labelled-corpus soak up down clean help

help:
	@echo "make demo   - start the local stack, upload a sample ZIP, show progress and results"
	@echo "make test   - lint, type-check and run every test (starts and stops LocalStack itself)"
	@echo "make fast   - the one-minute loop: unit tests but those marked slow, on both cores, few examples"
	@echo "              (needs nothing running)"
	@echo "make unit   - every unit test, full Hypothesis counts (needs nothing running)"
	@echo "make integration - adapters against real services: needs MariaDB (127.0.0.1:3306) and Redis"
	@echo "              (127.0.0.1:6379) running; starts LocalStack, installs Chromium if missing"
	@echo "make e2e    - deploys the stack to LocalStack and drives it as a user would (needs the same)"
	@echo "make cases  - regenerate docs/CASES.md by running every bad-input case through the pipeline"
	@echo "make docs   - regenerate docs/CONFIGURATION.md's tables from src/pdfbatch/config.py"
	@echo "make bench  - the performance benchmark (writes bench/results/latest.md)"
	@echo "make labelled-corpus - remake the committed LibreOffice PDFs of the labelled corpus (bench/corpus/)"
	@echo "make check-infra - the template: sam validate --lint, sam build (no Docker), checkov"
	@echo "make lock   - re-resolve every lock file (requirements/*.lock, functions/*/requirements.txt)"
	@echo "make soak   - the chaos soak: 2,000 PDFs under random faults, then the invariant checker"
	@echo "              (SEED=... replays a run's faults, PDFS=... sizes it, PROFILE=short is the CI one;"
	@echo "              tests/soak/seeds.py lists the seeds that found holes, docs/TESTING.md what to do)"
	@echo "make up / make down - start (and deploy) / stop the local stack"

$(STAMP): pyproject.toml $(DEV_LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(DEV_LOCK)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

# checkov pins boto3 and packaging below what the project uses: it gets a venv of its own.
$(CHECKOV_STAMP): $(CHECKOV_LOCK)
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(CHECKOV_LOCK)
	@rm -f $(CHECKOV_VENV)/.installed-* && touch $(CHECKOV_STAMP)

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core

$(TESSERACT):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng

demo: $(STAMP)
	$(BIN)/python -m pdfbatch.cli demo  # -m: the checkout is on sys.path, so the demo finds tools/ (not in the wheel)

test: $(STAMP) $(CHROMIUM) $(TESSERACT) lint check-infra
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy --python-version 3.11

# The AWS path of docs/DEPLOY.md, minus the deploy: the template validates and lints as SAM, builds with
# `sam build` (no Docker: each function's Makefile target below), and passes the security scan (every
# skipped check is explained next to its resource in the template).
check-infra: $(STAMP) $(CHECKOV_STAMP)
	$(BIN)/sam validate --lint --template infra/template.yaml --region us-east-1
	$(BIN)/sam build --template infra/template.yaml --build-dir build/sam/out --region us-east-1
	$(CHECKOV_VENV)/bin/checkov --quiet --compact --skip-download --framework cloudformation --file infra/template.yaml

# `sam build` runs build-<LogicalId> for each function (Metadata: BuildMethod: makefile in the template).
build-%Function: $(STAMP)
	$(BIN)/python -m tools.build --sam-function $* --artifacts-dir "$(ARTIFACTS_DIR)"

lock: $(STAMP)
	$(UV_COMPILE) --universal --python-version 3.11 pyproject.toml requirements/tools.in --extra dev -o $(DEV_LOCK)
	$(UV_COMPILE) --universal --python-version 3.11 requirements/checkov.in -o $(CHECKOV_LOCK)
	$(UV_COMPILE) $(LAMBDA_TARGET) pyproject.toml --extra ocr -o requirements/lambda.lock
	for fn in $(FUNCTIONS); do \
	  $(UV_COMPILE) $(LAMBDA_TARGET) -c requirements/lambda.lock functions/$$fn/requirements.in \
	    -o functions/$$fn/requirements.txt || exit 1; \
	done

# The one-minute loop: the unit tests but those marked slow, over both cores, a few examples per property
# (the `fast` Hypothesis profile, tests/fixtures/examples.py). PYTHONDONTWRITEBYTECODE, when the shell
# sets it, makes pytest rewrite every test module's asserts again at each start (~20 s here).
fast: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE HYPOTHESIS_PROFILE=fast $(BIN)/python -m pytest -q -n 2 -m "not slow" tests/unit

unit: $(STAMP) $(CHROMIUM) $(TESSERACT)
	$(BIN)/python -m pytest tests/unit

integration: $(STAMP) $(CHROMIUM) $(TESSERACT)
	$(BIN)/python -m pytest tests/integration

e2e: $(STAMP) $(CHROMIUM) $(TESSERACT)
	$(BIN)/python -m pytest tests/e2e

cases: $(STAMP)  ## docs/CASES.md from a run of every bad-input case through the real pipeline
	PDFBATCH_WRITE_CASES=1 $(BIN)/python -m pytest -q tests/integration/test_cases.py

# docs/CONFIGURATION.md's tables from config.py's field comments (tests/unit/test_configdoc.py checks them).
docs: $(STAMP)
	$(BIN)/python tools/configdoc.py

bench: $(STAMP) $(TESSERACT) $(CHROMIUM)
	$(BIN)/python -m bench

# LibreOffice is not in CI: its PDFs of the labelled corpus (issue 22) are committed; this remakes them
# (bench/corpus/libreoffice/, with labels.json) and prints their precision and recall.
labelled-corpus: $(STAMP)
	@command -v soffice >/dev/null || (DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends libreoffice-writer)
	$(BIN)/python -m bench.labelled

# The soak lives in tests/soak (it reuses the tests' PDF and ZIP generators); its short variant is
# tests/e2e/test_soak_short.py, which `make test` runs.
SEED ?=
PDFS ?=
PROFILE ?= full
soak: $(STAMP)
	PYTHONPATH=tests $(BIN)/python -m soak --profile $(PROFILE) $(if $(SEED),--seed $(SEED)) $(if $(PDFS),--pdfs $(PDFS))

up: $(STAMP)
	$(BIN)/pdfbatch stack up

down: $(STAMP)
	$(BIN)/pdfbatch stack down

clean: down
	rm -rf build .aws-sam .localstack .pytest_cache .mypy_cache .ruff_cache
