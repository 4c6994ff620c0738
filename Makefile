# gotune — see README.md. Every target installs what it needs on Debian 12.
GO       ?= go
BIN      := bin/gotune
GOFLAGS  ?=
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)
LDFLAGS  := -X github.com/gotune/gotune/bench.Version=$(VERSION)
TESTFLAGS ?= -count=1 -timeout 20m
# Debian packages the tests and anchors need (Open MPI for the side-by-side
# comparison and its integration tests).
DEB_PKGS := openmpi-bin libopenmpi-dev

.PHONY: all build deps test race bench sweep anchors lint clean

all: build

build:
	$(GO) build $(GOFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gotune

# deps installs the Debian packages the tests use, once.
deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

test: deps
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...

race: deps
	$(GO) test -race $(TESTFLAGS) ./...

# In-process micro-benchmarks of the engine (Go benchmark format).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./transports/... ./bench/...

# Until the tuner lands: a quick measurement of every transport here.
# sweep tunes this node with the quick built-in plan (under 5 minutes):
# results/<host>/<run-id>/ gets meta.json, measurements, summary and
# profile.yaml. PLAN=full or PLAN=file.yaml, RESUME=dir continue.
PLAN ?= quick
sweep: build
	$(BIN) sweep $(if $(RESUME),--resume $(RESUME),--plan $(PLAN))

# Side by side with Debian's Open MPI (vader, single copy cma and none);
# the numbers of record go under results/anchors/.
anchors: deps build
	$(BIN) anchors --out results/anchors

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin
