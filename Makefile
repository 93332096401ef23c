# Every target creates the virtualenv when it is missing, so a fresh clone
# needs nothing but python3 (>= 3.11) and make.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench mutate fuzz lint man clean

$(STAMP): pyproject.toml setup.py crawl/text/_compiled.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# Bytecode is written even where the environment says PYTHONDONTWRITEBYTECODE: the
# suite starts `python -m crawl` hundreds of times, and each start would compile the
# whole crawler again (a fifth of the suite's CPU). __pycache__ is ignored by git.
# Two xdist workers (TEST_WORKERS): most tests wait on crawl delays, servers and
# process start-up, so two took 551-596 s (1,546 tests, clean clones, load ~1-2;
# 596-639 s with the venv) where one took 1025 s (the last landing, fewer tests); a
# module's shared fixtures stay on one worker (--dist loadgroup, tests/conftest.py).
# The tests that missed on workers under load (fixed timeouts, stale snapshots, a
# wall-clock margin) now wait on what they check. Serially: make test TEST_WORKERS=
# A part: make test TEST_ARGS="tests/run -k sigterm"
TEST_WORKERS ?= -n 2 --dist loadgroup
TEST_ARGS ?=
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q $(TEST_WORKERS) $(TEST_ARGS)

bench: $(STAMP)
	@for f in scripts/bench*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# Not part of `make test` (hours for every mutant, even with tests chosen by coverage); a sample takes minutes, e.g.
# make mutate MUTATE="--rev HEAD --module politeness --sample 10"
MUTATE ?= --rev HEAD --jobs 2
mutate: $(STAMP)
	nice -n 10 $(BIN)/python scripts/mutate.py $(MUTATE)

# Each fuzz target in turn, FUZZ_SECONDS apiece (coverage-guided with atheris);
# what a run learns is kept in .fuzz/TARGET, a crashing input as .fuzz/TARGET/crash-*.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= robots canon record links http codings warc

fuzz: $(STAMP)
	@for t in $(FUZZ_TARGETS); do echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
	  $(BIN)/python tests/fuzz/fuzz.py $$t --seconds $(FUZZ_SECONDS) --max-len 65536 || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check crawl tests scripts

man: $(STAMP)
	$(BIN)/python scripts/gen_man.py

clean:
	rm -rf $(VENV) build *.egg-info
