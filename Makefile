# kremedy — see README.md. Two commands matter: `make demo` and `make test`.
GO      ?= go
BIN     := bin/kremedy
DEMODIR ?= $(or $(KREMEDY_CACHE),$(HOME)/.cache/kremedy)/demo-lab

.PHONY: build deps demo-deps lab-install lab-users lab-users-remove demo check test test-versions test-short bench bench-roll fuzz vet clean

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/kremedy

# What the tests use, from apt when missing: OpenSSH server, Maven, tmux,
# openssl, sudo, MIT Kerberos (see the script).
deps:
	./lab/install-deps.sh test

# What the demo uses, from apt when missing: OpenSSH server and Maven.
demo-deps:
	./lab/install-deps.sh demo

# Kafka 3.9.2 (the default), the older releases the version matrix runs,
# and 4.1.2 for the KRaft lab test (KRaft only, log4j2).
LAB_VERSIONS ?= 3.9.2,2.4.1,2.7.2,2.8.2,4.1.2
lab-install: deps build
	$(BIN) lab install --kafka-version $(LAB_VERSIONS)

# The local users the non-root SSH tests log in as (kremedy-op with
# passwordless sudo, kremedy-nosudo without); needs root. See the script.
lab-users:
	./lab/install-users.sh

lab-users-remove:
	-userdel -r kremedy-op
	-userdel -r kremedy-nosudo
	-userdel kremedy-kafka
	-groupdel kremedy-approvers
	rm -f /etc/sudoers.d/kremedy-lab

# A fresh lab, broken like the incident (ghost-topic), then the TUI on the
# cleanup runbook against it. Installs only what it uses (demo-deps); the
# Kafka jars come from Maven Central (lab install).
demo: demo-deps build
	$(BIN) lab install
	-$(BIN) lab down --dir $(DEMODIR) --purge
	$(BIN) lab up --dir $(DEMODIR)
	$(BIN) lab break ghost-topic --dir $(DEMODIR) --topic orders
	$(BIN) run topic-cleanup --inventory $(DEMODIR)/inventory.yaml --set topic=orders --set recreate=true

# The fast lane, no lab (about 30 s on a 2-core machine: the fake-based kind tests run on synctest time): formatting (gofmt -l must print
# nothing), vet, staticcheck (pinned; the Go proxy serves it, the build cache
# keeps it; staticcheck.conf says which checks), then the unit tests.
GOFMT       ?= gofmt
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
check:
	@files=$$($(GOFMT) -l .); if [ -n "$$files" ]; then \
		echo "gofmt -l: these files are not formatted (gofmt -w them):"; echo "$$files"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) test -short -count=1 ./...

# Every test: unit tests and the lab tests on real ZooKeeper, Kafka and sshd.
# LAB_PARALLEL labs run at once (each on its own --net). Two on a 2-core
# machine: three were measured (2026-12-06) no faster in all (41.4 min, the
# CPU saturated) and three lab tests then failed on time limits.
LAB_PARALLEL ?= 2
test: lab-install lab-users
	$(GO) vet ./...
	$(GO) test -race -count=1 -parallel $(LAB_PARALLEL) -timeout 80m ./...
	$(MAKE) fuzz

# The version matrix on every release the lab is tested with (make test runs
# 2.4.1 and 2.8.2 beside 3.9.2's own lab tests; this adds 2.7.2, 3.4.1 and
# runs all five releases' labs one after another), and the KRaft lab on
# every KRaft release it is tested with (make test runs 4.1.2; this adds
# 3.9.2 and the newest 4.x), and the heavy variants make test leaves out
# (KREMEDY_LAB_HEAVY=1: the Kerberized secured KRaft lab, the 10,000-partition
# diagnose lab, the JBOD disk-full lab, the secured migration lab).
ALL_VERSIONS := 2.4.1,2.7.2,2.8.2,3.4.1,3.9.2
KRAFT_VERSIONS := 3.9.2,4.1.2,4.4.0
test-versions: deps build
	$(BIN) lab install --kafka-version $(ALL_VERSIONS),$(KRAFT_VERSIONS)
	KREMEDY_LAB_VERSIONS=$(ALL_VERSIONS) KREMEDY_KRAFT_LAB_VERSIONS=$(KRAFT_VERSIONS) KREMEDY_LAB_HEAVY=1 \
		$(GO) test -count=1 -timeout 60m -run '^(TestVersionsLab|TestKRaftLab|TestSecureKRaftLab|TestDiagnoseScaleLab|TestDiskFullJBODLab|TestDiskFullJBODKRaftLab|TestSecureMigrationLab|TestOfflinePartitionsOlderLab|TestOfflinePartitionsKRaft39Lab|TestKRaftCombinedPlainLab|TestSecureKRaftDisastersLab)$$' -v ./cmd/kremedy

# Issue 42's figure, measured: six real brokers in three racks rolled one
# at a time and with batch=auto, BENCHCOUNT passes in a row, each a new lab
# rolled once each way (about 70 s a pass), so that the two modes
# alternate. Run it alone: a loaded machine measures the load. Compare with
# benchstat -col /mode bench-roll.txt (golang.org/x/perf/cmd/benchstat).
BENCHCOUNT ?= 6
bench-roll: lab-install
	@rm -f bench-roll.txt; for i in $$(seq $(BENCHCOUNT)); do \
		$(GO) test -run '^$$' -bench '^BenchmarkBatchRollLab$$' -benchtime 1x -count 1 -timeout 20m ./cmd/kremedy >> bench-roll.txt || { cat bench-roll.txt; exit 1; }; \
	done; cat bench-roll.txt

# A short, bounded run of every fuzz target (their seed corpora also run in
# every `go test`). FUZZTIME=5m make fuzz for a longer hunt; the default is a number of inputs, not a duration, so that a loaded machine runs the same work (and Go's fuzzer does not trip over its own deadline).
FUZZTIME ?= 30000x
FUZZ_TARGETS := \
	./runbooks:FuzzParse \
	./inventory:FuzzParse \
	./steps/kafkazk:FuzzDecodeZNodes \
	./steps/kafkazk:FuzzValidateTopic \
	./steps/zookeeper:FuzzReaderFrames \
	./steps/journal:FuzzRead \
	./steps/segments:FuzzParseDir \
	./steps/segments:FuzzParsePartitionMetadata \
	./internal/shell:FuzzQuote \
	./internal/javaprops:FuzzParse \
	./internal/javaprops:FuzzEscapeValue
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

# Unit tests only (no lab); the lab tests refuse to run without -short otherwise.
test-short:
	$(GO) test -short -count=1 ./...

vet:
	$(GO) vet ./...

clean:
	rm -rf bin
