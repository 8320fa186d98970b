# LiveDispatch: the two commands are `make run` and `make test`.
SWIFT ?= swift

.PHONY: bootstrap build test run release clean

bootstrap:
	./scripts/bootstrap

build: bootstrap
	$(SWIFT) build

test: bootstrap
	$(SWIFT) test

release: bootstrap
	$(SWIFT) build -c release

clean:
	rm -rf .build
