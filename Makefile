# LiveDispatch: the two commands are `make run` and `make test`.
SWIFT ?= swift

.PHONY: bootstrap build test check-deploy run release clean openapi fuzz faults

bootstrap:
	./scripts/bootstrap

build: bootstrap
	$(SWIFT) build

# deploy/ is checked offline first (scripts/check-deploy), then the Swift tests run.
test: bootstrap
	./scripts/check-deploy
	$(SWIFT) test --no-parallel

check-deploy: bootstrap
	./scripts/check-deploy

# The demo: an embedded Kafka cluster and an APNs simulator in-process,
# replaying Config/examples and printing each activity's Lock Screen; the
# worker keeps running, with its web console (address printed), until Ctrl-C.
run: bootstrap
	$(SWIFT) build --product livedispatch
	.build/debug/livedispatch run --config Config/livedispatch.yaml --replay Config/examples

# libFuzzer targets (JSON parser, command and token-registration decoding,
# expressions and templates, rule files evaluated on events), FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
fuzz: bootstrap
	SWIFT=$(SWIFT) FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz

# The fault suite: one scenario under each fault against real processes
# (embedded Kafka, APNs simulator, two workers), one row per fault.
faults: bootstrap
	$(SWIFT) build --product livedispatch
	.build/debug/livedispatch bench faults

release: bootstrap
	$(SWIFT) build -c release

# Regenerates the ingest API's server code from openapi.yaml (committed, so
# neither builds nor CI run the generator).
openapi:
	./scripts/generate-openapi

clean:
	rm -rf .build
