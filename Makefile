# LiveDispatch: the two commands are `make run` and `make test`.
SWIFT ?= swift

.PHONY: bootstrap build test run release clean fuzz

bootstrap:
	./scripts/bootstrap

build: bootstrap
	$(SWIFT) build

test: bootstrap
	$(SWIFT) test --no-parallel

# The demo: an embedded Kafka cluster and an APNs simulator in-process,
# replaying Config/examples and printing each activity's Lock Screen.
run: bootstrap
	$(SWIFT) build --product livedispatch
	.build/debug/livedispatch run --config Config/livedispatch.yaml --replay Config/examples --exit-after-replay

# libFuzzer targets (JSON parser, command and token-registration decoding,
# expressions and templates, rule files evaluated on events), FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
fuzz: bootstrap
	SWIFT=$(SWIFT) FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz

release: bootstrap
	$(SWIFT) build -c release

clean:
	rm -rf .build
