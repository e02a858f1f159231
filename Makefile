# The README's two commands are `make demo` and `make test`; everything they need is installed here.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)
# The upload page's browser test drives Debian's Chromium through Playwright (no browser download).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# The OCR lane's engine is the tesserocr wheel (pip, bundles libtesseract); the OCR benchmark also times
# Debian's tesseract command line against it (bench/ocr.py, through pytesseract).
TESSERACT := /usr/bin/tesseract

.PHONY: demo test lint unit integration e2e bench cases up down clean help

help:
	@echo "make demo   - start the local stack, upload a sample ZIP, show progress and results"
	@echo "make test   - lint, type-check and run every test (starts and stops LocalStack itself)"
	@echo "make cases  - regenerate docs/CASES.md by running every bad-input case through the pipeline"
	@echo "make bench  - the performance benchmark (writes bench/results/latest.md)"
	@echo "make up / make down - start (and deploy) / stop the local stack"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core

$(TESSERACT):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng

demo: $(STAMP)
	$(BIN)/pdfbatch demo

test: $(STAMP) $(CHROMIUM) lint
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit

integration: $(STAMP)
	$(BIN)/python -m pytest tests/integration

e2e: $(STAMP) $(CHROMIUM)
	$(BIN)/python -m pytest tests/e2e

cases: $(STAMP)  ## docs/CASES.md from a run of every bad-input case through the real pipeline
	PDFBATCH_WRITE_CASES=1 $(BIN)/python -m pytest -q tests/integration/test_cases.py

bench: $(STAMP) $(TESSERACT)
	$(BIN)/python -m bench

up: $(STAMP)
	$(BIN)/pdfbatch stack up

down: $(STAMP)
	$(BIN)/pdfbatch stack down

clean: down
	rm -rf build .localstack .pytest_cache .mypy_cache .ruff_cache
