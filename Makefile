# Thin targets; the scripts in hack/ do the work.
.PHONY: demo test bench build render e2e e2e-matrix clean

demo:
	hack/demo.sh

test:
	hack/test.sh

bench:
	hack/bench.sh

build:
	mkdir -p bin && go build -ldflags "$$(hack/version-ldflags.sh)" -o bin/svcproxy ./cmd/svcproxy

render: build
	bin/svcproxy render

e2e:
	hack/e2e.sh

e2e-matrix:
	hack/e2e-matrix.sh

clean:
	rm -rf bin
