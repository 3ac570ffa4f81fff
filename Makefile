# bir — the commands a newcomer needs. `make help` lists them.
#
#   make demo     record-and-show demo on a real MCP server (the main job)
#   make test     everything CI runs: lint, unit + integration tests,
#                 real peers (server-everything + Python mcp SDK), the official
#                 conformance suite, the real Claude Code CLI offline, and
#                 the HTML report in a real browser (make browser)
#   make build    static release binary
#   make bench    overhead benchmark (direct vs byte pump vs bir-proxy)
#   make bench-http  bir-proxy --url vs supergateway, mcp-proxy, a direct HTTP client
#   make browser  the HTML report (bir report) checked in headless Chromium
#   make golden   regenerate golden/ transcripts (then review `git diff golden/`)
#   make dist     release archive dist/bir-<version>-<target>.tar.gz + SHA256SUMS

SHELL := /bin/bash
# Nothing run from here sends runs to a developer's recording service.
export BIR_SERVICE_URL := off
PREFIX ?= $(HOME)/.local
TARGET ?= $(shell rustc -vV | sed -n 's/^host: //p')
# glibc static linking (musl is not available offline here).
STATIC_RUSTFLAGS := -C target-feature=+crt-static
RELEASE_BIN := target/$(TARGET)/release/bir
DEBUG_BIN := target/debug/bir

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
DIST_NAME := bir-$(VERSION)-$(TARGET)

.PHONY: help build size-check dist install uninstall test lint workflow-lint unit peers peer-tests doctor-peers conformance e2e browser otlp-receivers demo golden bench bench-http clean

help:
	@sed -n '1,15p' Makefile

build:
	RUSTFLAGS="$(STATIC_RUSTFLAGS)" cargo build --release --locked --target $(TARGET)
	@file $(RELEASE_BIN) | sed 's/, BuildID[^,]*//'
	@ldd $(RELEASE_BIN) 2>&1 | sed 's/^/ldd: /' || true
	@ls -l $(RELEASE_BIN) | awk '{printf "size: %.1f MiB (%d bytes)\n", $$5/1048576, $$5}'

# The release binary's size limit, in MiB. Everyone downloads the binary
# and every container image holds it: raise this on purpose only, saying
# in the commit what the extra size buys (9.3 MiB static on x86_64 Linux
# when the limit was set). `make test` runs this check, so CI fails when
# the binary grows past it.
MAX_BINARY_MIB := 10

size-check: build
	@size=$$(wc -c < $(RELEASE_BIN)); limit=$$(( $(MAX_BINARY_MIB) * 1048576 )); \
	if [ "$$size" -gt "$$limit" ]; then \
		echo "size-check: $(RELEASE_BIN) is $$size bytes, over MAX_BINARY_MIB=$(MAX_BINARY_MIB) ($$limit bytes); raise the limit in the Makefile on purpose, or shrink the binary" >&2; \
		exit 1; \
	fi; \
	echo "size-check: $$size bytes, within MAX_BINARY_MIB=$(MAX_BINARY_MIB)"

# The release layout install/install.sh expects: serve dist/ as
# <base>/v<version>/ (and <base>/latest/ for the newest release).
dist: build
	rm -rf dist/stage && mkdir -p dist/stage/$(DIST_NAME)
	cp $(RELEASE_BIN) dist/stage/$(DIST_NAME)/bir
	cp -R README.md docs dist/stage/$(DIST_NAME)/
	tar -C dist/stage --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
		-cf - $(DIST_NAME) | gzip -9n > dist/$(DIST_NAME).tar.gz
	rm -rf dist/stage
	cp install/install.sh dist/install.sh
	cd dist && sha256sum bir-*.tar.gz > SHA256SUMS
	@cat dist/SHA256SUMS

install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(RELEASE_BIN) $(DESTDIR)$(PREFIX)/bin/bir
	ln -sf bir $(DESTDIR)$(PREFIX)/bin/bir-proxy
	ln -sf bir $(DESTDIR)$(PREFIX)/bin/bir-hooks
	@echo "installed bir, bir-proxy, bir-hooks in $(DESTDIR)$(PREFIX)/bin"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/bir $(DESTDIR)$(PREFIX)/bin/bir-proxy $(DESTDIR)$(PREFIX)/bin/bir-hooks

lint:
	cargo fmt --check
	cargo clippy --locked --all-targets -- -D warnings

# The release workflow (.github/workflows/), by actionlint from
# scripts/install-peers.sh.
workflow-lint: peers
	.peers/lint/bin/actionlint .github/workflows/*.yml

unit:
	cargo test --locked

peers:
	scripts/install-peers.sh

$(DEBUG_BIN): $(shell find src -name '*.rs') Cargo.toml Cargo.lock build.rs
	cargo build --locked

# Real peers: server-everything driven by the Python mcp SDK and raw
# JSON-RPC, direct vs through bir-proxy.
# Runs recorded by the peer suites go to a scratch BIR_HOME, never ~/.
PEER_BIR_HOME := $(CURDIR)/target/peer-bir-home

peer-tests: peers $(DEBUG_BIN)
	BIR_HOME="$(PEER_BIR_HOME)" BIR_PROXY_WRAP="$(CURDIR)/$(DEBUG_BIN) proxy --server-name everything --" .peers/venv/bin/python tests/peers/compare.py

# bir install + bir doctor against real servers (everything, memory, a
# Python mcp server) and a broken entry.
doctor-peers: peers $(DEBUG_BIN)
	BIR_BIN="$(CURDIR)/$(DEBUG_BIN)" tests/peers/doctor.sh

conformance: peers $(DEBUG_BIN)
	BIR_HOME="$(PEER_BIR_HOME)" BIR_PROXY_WRAP="$(CURDIR)/$(DEBUG_BIN) proxy --server-name everything --" tests/peers/conformance.sh

e2e: $(DEBUG_BIN)
	BIR_BIN="$(CURDIR)/$(DEBUG_BIN)" E2E_CC_DIR="$(CURDIR)/.peers/cc" tests/e2e/run.sh
	BIR_BIN="$(CURDIR)/$(DEBUG_BIN)" E2E_CC_DIR="$(CURDIR)/.peers/cc" tests/e2e/run-install.sh
	BIR_BIN="$(CURDIR)/$(DEBUG_BIN)" E2E_CC_DIR="$(CURDIR)/.peers/cc" tests/e2e/run-bound.sh
	BIR_BIN="$(CURDIR)/$(DEBUG_BIN)" E2E_CC_DIR="$(CURDIR)/.peers/cc" tests/e2e/run-mock.sh
	BIR_BIN="$(CURDIR)/$(DEBUG_BIN)" E2E_CC_DIR="$(CURDIR)/.peers/cc" tests/e2e/run-guide.sh
	BIR_BIN="$(CURDIR)/$(DEBUG_BIN)" tests/e2e/run-codex.sh
	BIR_BIN="$(CURDIR)/$(DEBUG_BIN)" tests/e2e/run-gemini.sh

# The HTML report in a real browser: Debian's Chromium (/usr/bin/chromium,
# installed by .ci/run) driven by playwright-core (.peers/browser). The pages
# are the report tests' (BIR_REPORT_PAGES) and the demo's; the demo page's
# screenshot is kept as target/report-demo.png.
REPORT_PAGES := $(CURDIR)/target/report-pages

browser: peers $(DEBUG_BIN)
	rm -rf "$(REPORT_PAGES)" && mkdir -p "$(REPORT_PAGES)"
	BIR_REPORT_PAGES="$(REPORT_PAGES)" cargo test --locked --test it report:: -- --quiet
	BIR_HOME="$(REPORT_PAGES)/demo-home" scripts/demo.sh >"$(REPORT_PAGES)/demo.log"
	cp "$(REPORT_PAGES)"/demo-home/reports/*.html "$(REPORT_PAGES)/demo.html"
	cp tests/browser/demo.expect.json "$(REPORT_PAGES)/"
	node tests/browser/report.mjs "$(REPORT_PAGES)"
	cp "$(REPORT_PAGES)/demo.png" target/report-demo.png

# Real OpenTelemetry receivers: rotel always; otelite and
# Phoenix (slow to install and start) with BIR_TEST_OTLP_RECEIVERS=all.
# rotel is in the list whatever the variable says (an empty or other
# value cannot skip it), and a receiver named here that is not installed
# fails its test rather than skipping it.
comma := ,
OTLP_RECEIVERS := rotel$(if $(strip $(BIR_TEST_OTLP_RECEIVERS)),$(comma)$(strip $(BIR_TEST_OTLP_RECEIVERS)))
otlp-receivers:
	BIR_TEST_OTLP_RECEIVERS=$(OTLP_RECEIVERS) scripts/install-otlp-receivers.sh
	BIR_TEST_OTLP_RECEIVERS=$(OTLP_RECEIVERS) cargo test --locked --test it otlp_receivers::

# When this make started: the last step of `make test` fails if a process
# started since then, under the clone or its peers, is still running.
SUITE_STARTED := $(shell date +%s)

test: lint peers workflow-lint size-check unit peer-tests doctor-peers conformance e2e browser otlp-receivers
	scripts/check-leftovers.py --since $(SUITE_STARTED) $(if $(BIR_OTLP_PEERS),--also "$(BIR_OTLP_PEERS)")
	@echo "make test: all suites passed"

demo: $(DEBUG_BIN)
	scripts/demo.sh

golden:
	BIR_UPDATE_GOLDEN=1 cargo test --locked --test it golden::
	@git status --short golden/

bench: build
	BIR_BIN=$(RELEASE_BIN) cargo bench --locked --bench relay
	cargo bench --locked --bench redact
	cargo bench --locked --bench scan
	BIR_BIN=$(RELEASE_BIN) cargo bench --locked --bench daemon
	BIR_BIN=$(RELEASE_BIN) cargo bench --locked --bench hook_posts
	BIR_BIN=$(RELEASE_BIN) cargo bench --locked --bench runs
	python3 bench/lazy_startup.py --bir $(RELEASE_BIN) --claude --rounds 3
	python3 bench/lazy_startup.py --bir $(RELEASE_BIN) --real-claude --rounds 3
	python3 bench/hooks_session.py --bir $(RELEASE_BIN) --rounds 5

# bir-proxy --url vs supergateway vs mcp-proxy vs a direct HTTP client.
bench-http: peers
	cargo build --release --locked
	test -x .peers/bench-venv/bin/mcp-proxy || { python3 -m venv .peers/bench-venv && .peers/bench-venv/bin/pip install -q mcp-proxy==0.13.0; }
	cargo bench --locked --bench http

clean:
	cargo clean
	rm -rf .peers dist
