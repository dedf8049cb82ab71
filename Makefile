# kremedy — see README.md. Two commands matter: `make demo` and `make test`.
GO      ?= go
BIN     := bin/kremedy
DEMODIR ?= $(or $(KREMEDY_CACHE),$(HOME)/.cache/kremedy)/demo-lab

.PHONY: build deps lab-install demo test test-short bench fuzz vet clean

build:
	$(GO) build -o $(BIN) ./cmd/kremedy

# OpenSSH server, Maven, tmux from apt when missing; then Kafka jars from Maven Central.
deps:
	./lab/install-deps.sh

lab-install: deps build
	$(BIN) lab install

# A fresh lab, broken like the incident (ghost-topic), then the TUI on the
# cleanup runbook against it.
demo: lab-install
	-$(BIN) lab down --dir $(DEMODIR) --purge
	$(BIN) lab up --dir $(DEMODIR)
	$(BIN) lab break ghost-topic --dir $(DEMODIR) --topic orders
	$(BIN) run topic-cleanup --inventory $(DEMODIR)/inventory.yaml --set topic=orders --set recreate=true

# Every test: unit tests and the lab tests on real ZooKeeper, Kafka and sshd.
test: lab-install
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 40m ./...

# Unit tests only (no lab); the lab tests refuse to run without -short otherwise.
test-short:
	$(GO) test -short -count=1 ./...

vet:
	$(GO) vet ./...

clean:
	rm -rf bin
