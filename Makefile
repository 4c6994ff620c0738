# gotune — see README.md. Every target installs what it needs on Debian 12.
GO       ?= go
BIN      := bin/gotune
GOFLAGS  ?=
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)
LDFLAGS  := -X github.com/gotune/gotune/internal/hostinfo.Version=$(VERSION)
TESTFLAGS ?= -count=1 -timeout 20m
# Debian packages the build needs (a C compiler: go-nvml and internal/verbs
# are cgo; libibverbs-dev for the verbs headers only, nothing links it), and those
# the tests and anchors add (Open MPI for the side-by-side comparison and its
# integration tests; python3 for the GPU summary's test under scripts/gpu;
# Slurm, munge and iperf3 for the namespace-hosts of internal/testutil/cluster;
# chromium for the test that opens gotune report's page headless, offline).
BUILD_PKGS := gcc libc6-dev libibverbs-dev
DEB_PKGS   := $(BUILD_PKGS) openmpi-bin libopenmpi-dev mpich libmpich-dev ucx-utils libmimalloc2.0 python3 \
	slurmctld slurmd slurm-client munge iperf3 chromium iproute2

.PHONY: all build build-deps deps test fuzz race faults bench sweep anchors fullnode lint clean

all: build

build: build-deps
	$(GO) build $(GOFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gotune

# install PKGS: apt-get update and install those not installed yet.
define install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
endef

build-deps:
	$(call install,$(BUILD_PKGS))

# deps installs the Debian packages the tests use, once.
deps:
	$(call install,$(DEB_PKGS))

test: deps
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...
	$(MAKE) --no-print-directory fuzz

# fuzz runs every fuzz target briefly (FUZZTIME each; the parsers of other
# tools' output, the profile loader, the launcher's bootstrap, tcp's
# handshake and frames and ib's headers as a hostile peer sends them): go test -fuzz takes one target of
# one package per run. An input count, not a duration: a duration that ends
# while the workers still replay the corpus on a loaded machine fails the
# run with "context deadline exceeded".
FUZZTIME ?= 50000x
FUZZ_PKGS := ./bench/importer ./profile ./transports/tcp ./transports/ib ./internal/launch
fuzz:
	@set -e; for p in $(FUZZ_PKGS); do \
		for f in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz'); do \
			echo "fuzz $$p $$f ($(FUZZTIME))"; \
			log=$$(mktemp); \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p >$$log 2>&1 || { grep -v '^fuzz: elapsed' $$log; rm -f $$log; exit 1; }; \
			rm -f $$log; \
		done; \
	done

race: deps
	$(GO) test -race $(TESTFLAGS) ./...

# faults runs the fault campaign (internal/faults): FAULT_RUNS gotune
# commands (bench, probe, sweep), each with a rank killed or stopped, or
# the command killed, at a random moment, and what is left checked after
# each; one JSON line per run goes to FAULT_REPORT. FAULT_SEED repeats a
# campaign; FAULT_KIND (part of a kind's name) draws from those kinds only.
# make test runs its short form, one run of each of the first kinds.
FAULT_RUNS ?= 200
FAULT_STAMP := $(shell date -u +%Y%m%d-%H%M%S)
FAULT_REPORT ?= results/faults-$(FAULT_STAMP).jsonl
faults: build
	@mkdir -p $(dir $(FAULT_REPORT))
	GOTUNE_BIN=$(abspath $(BIN)) GOTUNE_FAULT_RUNS=$(FAULT_RUNS) GOTUNE_FAULT_REPORT=$(abspath $(FAULT_REPORT)) \
		$(if $(FAULT_SEED),GOTUNE_FAULT_SEED=$(FAULT_SEED)) $(if $(FAULT_KIND),GOTUNE_FAULT_KIND='$(FAULT_KIND)') \
		$(GO) test -count=1 -timeout 0 -run '^TestFaultCampaign$$' -v ./internal/faults
	@echo "report: $(FAULT_REPORT)"

# soak sends validated traffic through every transport (and GPU memory
# kind) present for SOAK_TIME (internal/faults TestSoak): 0 wrong bytes,
# descriptors, mappings and memory flat while each run's ranks run, and
# nothing left after it; one JSON line per run goes to SOAK_REPORT.
# SOAK_LANES=N runs N such sequences at once, each on its own share of
# the CPUs (a node of many cores carries more than one pair's traffic).
SOAK_TIME ?= 10m
SOAK_REPORT ?= results/soak-$(FAULT_STAMP).jsonl
.PHONY: soak
soak: build
	@mkdir -p $(dir $(SOAK_REPORT))
	GOTUNE_BIN=$(abspath $(BIN)) GOTUNE_SOAK_TIME=$(SOAK_TIME) GOTUNE_SOAK_REPORT=$(abspath $(SOAK_REPORT)) \
		$(if $(SOAK_SEED),GOTUNE_SOAK_SEED=$(SOAK_SEED)) $(if $(SOAK_LANES),GOTUNE_SOAK_LANES=$(SOAK_LANES)) \
		$(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./internal/faults
	@echo "report: $(SOAK_REPORT)"

# In-process micro-benchmarks of the engine (Go benchmark format).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./transports/... ./bench/... ./profile/native/ncclplugin

# sweep tunes this node with the quick built-in plan (under 5 minutes): a
# run directory $(RESULTS)/<host>/<run-id> gets meta.json, measurements,
# summary, profile.yaml and, last, report.html with its plots (gotune sweep
# prints its path). PLAN=full or PLAN=file.yaml, RESUME=dir continue.
# RESULTS is gotune's default results root; only its catalogue is checked in.
RESULTS := results
PLAN ?= quick
sweep: build
	$(BIN) sweep $(if $(RESUME),--resume $(RESUME),--plan $(PLAN))

# Side by side with Debian's Open MPI (vader, single copy cma and none),
# tables and runs written under $(RESULTS)/anchors.
anchors: deps build
	$(BIN) anchors --out $(RESULTS)/anchors

# The full-node set at RANKS ranks (default node: one per CPU of the cpuset):
# sm's footprint, H5 and H8 at that count with their unsafe twins, incast
# validated, and gotune stacks --ranks beside Open MPI and MPICH; logs and
# summary.txt under OUT (default results/fullnode/<host>-<time>). See
# scripts/fullnode/run.sh for REPS, TRANSPORTS, PROFILE, STACKS_ARGS.
RANKS ?= node
fullnode: deps build
	RANKS=$(RANKS) scripts/fullnode/run.sh $(BIN)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin

# ---- GPU: build here (no GPU needed), run on a GPU machine (scripts/gpu/).
# gpu-build builds bin/gotune for linux/amd64 (cgo: NVML) and the test
# binaries of the GPU packages, named after the package path
# (internal/cuda -> bin/internal_cuda.test) so that scripts/gpu/run.sh runs
# each in its package directory. A package that does not exist yet is skipped.
GPU_PKGS  ?= internal/cuda internal/gpu bench/gpuload bench transports/cudaipc transports/gpumem transports/nccl tuner/probe
GPU_GOENV := GOOS=linux GOARCH=amd64 CGO_ENABLED=1
# Stripped (-s -w): the working tree and bin/ travel to the GPU machine
# together under a 64 MiB limit; Go's tracebacks do not need the symbols.
GPU_LDFLAGS := $(LDFLAGS) -s -w

.PHONY: gpu-build gputest

gpu-build: build-deps
	$(GPU_GOENV) $(GO) build $(GOFLAGS) -ldflags "$(GPU_LDFLAGS)" -o $(BIN) ./cmd/gotune
	@set -e; for p in $(GPU_PKGS); do \
		if [ ! -d "$$p" ]; then echo "gpu-build: $$p does not exist yet, skipped"; continue; fi; \
		t=bin/$$(echo "$$p" | tr / _).test; \
		echo "$(GPU_GOENV) $(GO) test -c -o $$t ./$$p"; \
		$(GPU_GOENV) $(GO) test $(GOFLAGS) -ldflags "$(GPU_LDFLAGS)" -c -o $$t ./$$p; \
	done

# gputest runs scripts/gpu/run.sh here when this machine has a GPU (results
# under OUT, default $(RESULTS)/gpu/<UTC date>): the GPU test binaries, the bench
# lines of scripts/gpu/issue4.bench (or GOTUNE_GPU_BENCH), the GPU probes, a
# GPU sweep (plan GOTUNE_GPU_SWEEP, default gpu; empty: none) and the
# PyTorch/NCCL baselines. Without a GPU it says how to run it on one.
GOTUNE_GPU_SWEEP ?= gpu
gputest: gpu-build
	@if nvidia-smi -L >/dev/null 2>&1; then \
		GOTUNE_GPU_BENCH="$${GOTUNE_GPU_BENCH-$$(cat scripts/gpu/issue4.bench)}" GOTUNE_GPU_SWEEP="$(GOTUNE_GPU_SWEEP)" \
		GPU_RUN_BUDGET="$${GPU_RUN_BUDGET-1200}" \
		OUT="$(or $(OUT),$(RESULTS)/gpu/$(shell date -u +%Y%m%d-%H%M%S))" scripts/gpu/run.sh; \
	else \
		echo "gputest: no GPU here (nvidia-smi -L fails); bin/ is built for a GPU machine:"; \
		echo "  copy the working tree with bin/ (git-ignored: carry it explicitly) and there, in its root, run"; \
		echo "    OUT=<dir> GOTUNE_GPU_BENCH=\"\$$(cat scripts/gpu/issue4.bench)\" GOTUNE_GPU_SWEEP=gpu scripts/gpu/run.sh"; \
		echo "  (needs nvidia-smi and python3 with PyTorch there, no Go; see scripts/gpu/README.md)"; \
	fi

# docs regenerates docs/options.md from the code (every --opt key and plan
# key); TestOptionsDocIsCurrent fails when the checked-in file is stale.
.PHONY: docs
docs:
	$(GO) run ./cmd/gotune options --markdown > docs/options.md.tmp && mv docs/options.md.tmp docs/options.md

# vmtest boots Debian's own kernel under qemu (TCG, no KVM needed) with
# Soft-RoCE (rdma_rxe) and runs the verbs tests inside (scripts/vm/vmtest.sh:
# kernel and rdma-core from Debian's packages, cached under build/vm; exit
# status from the guest's status line). Emulated: function, never speed.
VMTEST_PKGS := qemu-system-x86 busybox-static cpio iproute2 xz-utils
.PHONY: vmtest
vmtest: build-deps
	$(call install,$(VMTEST_PKGS))
	scripts/vm/vmtest.sh

# vmtest-xpmem / vmtest-knem: the stable boot of vmtest with a kernel module
# the user built for Debian 12's kernel (XPMEM_KO=path / KNEM_KO=path),
# loaded inside: the transport's tests with the module required, probe H1X
# (xpmem), gotune selftest, a validated alloc bench and bandwidth beside cma
# and sm (scripts/vm/modules.sh). Without a module: says so and runs them
# against the fake device (what CI runs).
.PHONY: vmtest-xpmem vmtest-knem
vmtest-xpmem vmtest-knem: build-deps
	$(call install,$(VMTEST_PKGS))
	scripts/vm/modules.sh $(@:vmtest-%=%)
