# Developer entry points. `make demo` and `make test` work on a fresh machine with
# Python >= 3.10 and pip: the first target that needs it creates `.venv` and installs the
# package with its `dev` extras (jax, numpyro, pytest, ruff, matplotlib, ...).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# written after a successful install; redone when the package metadata changes
STAMP := $(VENV)/.installed-dev
DOCS_STAMP := $(VENV)/.installed-docs
BENCH_ARGS ?=

.PHONY: venv demo demo-fhmm test test-slow lint docs wheel-check bench bench-binary bench-fhmm bench-rbm \
	bench-structure bench-compile bench-scaling

venv: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	@if [ ! -x $(BIN)/python ]; then \
		echo "creating $(VENV) with $(PYTHON)"; \
		$(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --upgrade pip; \
	fi
	$(BIN)/python -m pip install -e ".[dev]"
	@touch $@

# the flagship example: image segmentation, LBPGibbs(NUTS, ChromaticGibbs) against numpyro's
# DiscreteHMCGibbs at equal wall time (about 40 s on two CPU cores); demo-fhmm runs the FHMM
demo: venv
	$(BIN)/python examples/segmentation.py --out outputs

demo-fhmm: venv
	$(BIN)/python examples/fhmm.py --out outputs

# two worker processes: much of the suite is compilation, which runs on one core
test: venv
	$(BIN)/python -m pytest -q -n 2 --durations=25

# the slow tier, also on two workers; the 500 random model-kernel pairs and the soak run last
test-slow: venv
	$(BIN)/python -m pytest -q -n 2 -m slow

lint: venv
	$(BIN)/python -m ruff check .

# a wheel and an sdist (python -m build) into dist/, the wheel installed in a fresh venv
# (outside the checkout) and a short sampling run there (tools/wheel_smoke.py)
wheel-check: venv
	rm -rf dist build/wheel-venv
	$(BIN)/python -m pip install -q build
	$(BIN)/python -m build --outdir dist .
	$(PYTHON) -m venv build/wheel-venv
	build/wheel-venv/bin/python -m pip install -q dist/*.whl
	cd build && wheel-venv/bin/python ../tools/wheel_smoke.py

# the documentation site (mkdocs.yml, docs/) into site/; warnings fail the build
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install -e ".[docs]"
	@touch $@

# the paper-reproduction suite (benchmarks/paper): reduced sizes, under 10 minutes on two
# CPU cores; BENCH_ARGS=--full runs the paper's sizes (hours)
bench: venv
	$(BIN)/python -m benchmarks.paper $(BENCH_ARGS)

bench-binary: venv
	$(BIN)/python -m benchmarks.bench_binary $(BENCH_ARGS)

bench-fhmm: venv
	$(BIN)/python -m benchmarks.bench_fhmm $(BENCH_ARGS)

# structure detection: ChromaticGibbs and colour-batched ALBP against DiscreteGibbs and a
# hand-written checkerboard sampler (about 10 minutes on two CPU cores)
bench-structure: venv
	$(BIN)/python -m benchmarks.bench_structure $(BENCH_ARGS)

# what a user waits for: first MCMC.run, a later run's fixed cost, the step, end-to-end
# minESS per wall second, each in a fresh process without the persistent compilation cache
bench-compile: venv
	$(BIN)/python -m benchmarks.bench_compile $(BENCH_ARGS)

# step time and ESS/s against vectorized chains (1-256) and N (10^3-10^6), about 20 minutes
bench-scaling: venv
	$(BIN)/python -m benchmarks.bench_scaling $(BENCH_ARGS)

# PCD training of a digits RBM: MH steps per iteration LBP-1 and ALBP need (paper Table 2)
bench-rbm: venv
	$(BIN)/python -m benchmarks.paper.rbm_pcd $(BENCH_ARGS)
