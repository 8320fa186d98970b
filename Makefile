# LiveDispatch: the two commands are `make run` and `make test`.
SWIFT ?= swift

.PHONY: bootstrap bootstrap-run bootstrap-test build test check-links check-deploy run release image clean openapi fuzz faults

# Everything: what the run needs and what the tests need.
bootstrap: bootstrap-test

# Only what building and running the worker needs (Debian's librdkafka-dev,
# libnghttp2-dev, libssl-dev, pkg-config), so `make run` starts soon.
bootstrap-run:
	./scripts/bootstrap run

# And the test tools: kcat, nghttp2, promtool, Chromium, the Python venv
# (Tansu, a newer librdkafka, schemathesis, playwright, deploy checks).
bootstrap-test:
	./scripts/bootstrap test

build: bootstrap-run
	$(SWIFT) build

# The documentation's relative links first (scripts/check-links), deploy/
# offline (scripts/check-deploy), the container image as `make image` builds
# it (tagged livedispatch:test, which the container tests run), then the
# Swift tests in two lanes at once (scripts/test).
test: bootstrap-test
	./scripts/check-links
	./scripts/check-deploy
	./scripts/image build livedispatch:test
	SWIFT=$(SWIFT) ./scripts/test

check-links:
	./scripts/check-links

check-deploy: bootstrap-test
	./scripts/check-deploy

# The demo: an embedded Kafka cluster and an APNs simulator in-process,
# replaying Config/examples and printing each activity's Lock Screen; the
# worker keeps running, with its web console (address printed), until Ctrl-C.
run: bootstrap-run
	$(SWIFT) build --product livedispatch
	.build/debug/livedispatch run --config Config/livedispatch.yaml --replay Config/examples

# libFuzzer targets (JSON parser, command and token-registration decoding,
# expressions and templates, rule files evaluated on events), FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
fuzz: bootstrap-run
	SWIFT=$(SWIFT) FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz

# The fault suite: one scenario under each fault against real processes
# (embedded Kafka, APNs simulator, two workers), one row per fault.
faults: bootstrap-run
	$(SWIFT) build --product livedispatch
	$(SWIFT) build --product livedispatch-bench
	.build/debug/livedispatch-bench faults

release: bootstrap-run
	$(SWIFT) build -c release

# The container image that ships (deploy/docker/Dockerfile) built with podman:
# a release binary in the Debian 13 runtime stage (scripts/image; deploy/README.md).
image: bootstrap-run
	./scripts/image build

# Regenerates the ingest API's server code from openapi.yaml (committed, so
# neither builds nor CI run the generator).
openapi:
	./scripts/generate-openapi

clean:
	rm -rf .build
