# The whole set-up on a fresh machine: `make run` or `make test` creates .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# The core, the store, the graph and the front-ends, strictly ([tool.mypy] in pyproject.toml).
MYPY := $(VENV)/bin/mypy --strict core store agent_graph.py display.py agent.py cli web terminal mcp_servers
# Every fsagent and server process a test starts imports our modules. Where
# PYTHONDONTWRITEBYTECODE is set (as on this project's machines) each would compile them again,
# about a third of a second a launch; compiled once here, they are read.
COMPILE := $(PY) -m compileall -q agent.py agent_graph.py display.py cli core store terminal web mcp_servers tests
# The inbox page's browser test drives Debian's Chromium (Playwright's own browsers cannot be
# downloaded here). Installed when missing; if that fails the test fails and says why.
CHROMIUM := /usr/bin/chromium

.PHONY: run test bench demo regress lint typecheck clean postgres acl strace conformance conformance-suite node-modules

# Two stamps: `make run` installs what running needs (the package alone); `make test`,
# `make lint` and `make bench` add the test extras (pytest, the checkers, playwright, ...).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

# The Postgres tests and benchmarks start a throwaway server of their own (tests/pg_server.py)
# from Debian's postgresql package: installed here when missing, quietly, with no question.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || { \
	  echo "installing Debian's postgresql package (the Postgres tests start a server)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; }

# The filesystem server's ACL test sets an ACL with setfacl, from Debian's acl package.
acl:
	@command -v setfacl >/dev/null || { \
	  echo "installing Debian's acl package (the ACL test runs setfacl)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends acl >/dev/null; }

# The journal's order test (tests/mcp_servers/test_filesystem_journal.py) reads the server's
# system calls with strace: each step comes after the journal's fdatasync.
strace:
	@command -v strace >/dev/null || { \
	  echo "installing Debian's strace package (the journal's order test runs it)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends strace >/dev/null; }

# The inbox page's accessibility test injects axe-core (package.json, pinned by
# package-lock.json) into the page: installed into node_modules when missing or out of date.
node-modules: node_modules/.package-lock.json
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --silent --no-audit --no-fund

# In a clone, threads are kept at its top (an installed fsagent keeps them in the data folder,
# $XDG_DATA_HOME/fsagent); FSAGENT_DB or --db in ARGS still say otherwise.
run: $(STAMP)
	FSAGENT_DB="$${FSAGENT_DB:-$(CURDIR)/threads.db}" $(VENV)/bin/fsagent $(ARGS)

$(CHROMIUM):
	-@echo "make: installing Debian's chromium for the browser test" && \
	  export DEBIAN_FRONTEND=noninteractive && \
	  apt-get update -qq && \
	  apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 chromium \
	  >/dev/null

# The import rules and the types first: a broken layout or contract fails fast. Tests run on every core (-n auto).
# Then the MCP server's whole suite again on its portable path (mcp_servers/platform_calls.py:
# as on macOS, without O_PATH or preadv). Then its escape, race and link tests with Landlock
# off (FSAGENT_LANDLOCK_ABI=0): the server's own containment alone, as macOS has it (the
# parent swaps too: a folder moved out between a check and its act), so a
# regression there cannot hide behind the kernel (os.O_NOFOLLOW dropped from FOLDER_FLAGS
# fails this pass and no other). Not the whole suite: the Landlock tests test the kernel's
# layer, and the rest would double the pass (docs/filesystem-server.md). PYTEST_ARGS go to
# every pass: .ci/run passes a --basetemp of another length than pytest's own
# (docs/development.md says why).
FIRST_LAYER_TESTS := tests/mcp_servers/test_filesystem_links.py \
  tests/mcp_servers/test_filesystem_races.py tests/mcp_servers/test_filesystem_act_races.py \
  tests/mcp_servers/test_filesystem_sandbox.py tests/mcp_servers/test_filesystem_hostile.py \
  tests/mcp_servers/test_parent_swaps.py
test: $(TEST_STAMP) postgres acl strace conformance-suite node-modules $(CHROMIUM)
	$(VENV)/bin/lint-imports
	$(MYPY)
	$(COMPILE)
	$(PY) -m pytest -q -n auto $(PYTEST_ARGS)
	FSAGENT_PORTABLE_CALLS=1 $(PY) -m pytest -q -n auto $(PYTEST_ARGS) tests/mcp_servers
	FSAGENT_LANDLOCK_ABI=0 $(PY) -m pytest -q -n auto $(PYTEST_ARGS) $(FIRST_LAYER_TESTS)

bench: $(TEST_STAMP) postgres
	$(COMPILE)
	$(PY) -m bench

# The whole approval flow from a recorded session: no LM Studio needed.
demo: $(STAMP)
	$(VENV)/bin/fsagent regress examples/demo --show

regress: $(STAMP)
	$(VENV)/bin/fsagent regress examples

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(MYPY)

# The official MCP conformance suite's whole active suite on the filesystem server, against
# tests/mcp_servers/conformance-baseline.yml (docs/filesystem-server.md, "Conformance"). It needs
# Node 22, installed with the suite by npm outside the repo; the test suite runs the scenarios
# that apply to any server once this has installed them.
CONFORMANCE_DIR ?= $(HOME)/.cache/fsagent-conformance
conformance: $(TEST_STAMP) conformance-suite
	FSAGENT_CONFORMANCE_DIR=$(CONFORMANCE_DIR) $(PY) tests/mcp_servers/run_conformance.py

# The suite and its Node 22, for `make conformance` and for the tests, which run the scenarios
# that apply to any server: installed here when missing, quietly, like postgres and acl.
conformance-suite:
	@test -x $(CONFORMANCE_DIR)/node_modules/.bin/conformance || { \
	  echo "installing the MCP conformance suite and Node 22 into $(CONFORMANCE_DIR)"; \
	  npm install --silent --no-audit --no-fund --prefix $(CONFORMANCE_DIR) \
	    node@22 @modelcontextprotocol/conformance@0.1.16; }

# The contracts' home, strictly typed: any error fails `make lint` and `make test`.
typecheck: $(TEST_STAMP)
	$(MYPY)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .import_linter_cache node_modules
