# Thin targets; the scripts in hack/ do the work.
.PHONY: demo test bench build image render e2e e2e-matrix e2e-node conformance soak clean

demo:
	hack/demo.sh

test:
	hack/test.sh

bench:
	hack/bench.sh

build:
	mkdir -p bin && go build -ldflags "$$(hack/version-ldflags.sh)" -o bin/svcproxy ./cmd/svcproxy

# An OCI image archive without a container engine: bin/svcproxy-image.tar
# (make image IMAGE=name:tag to name it otherwise); prints its size.
IMAGE ?= svcproxy:dev
image:
	go run ./hack/image -o bin/svcproxy-image.tar -tag $(IMAGE)

render: build
	bin/svcproxy render

e2e:
	hack/e2e.sh

e2e-matrix:
	hack/e2e-matrix.sh

# The chaos soak on the e2e cluster: SOAK_DURATION (15m), SOAK_SEED (docs/soak.md).
soak:
	hack/soak.sh

# Real kubelets, containerd and CNI; svcproxy as its DaemonSet (docs/e2e-node.md).
e2e-node:
	hack/e2e-node.sh

# Upstream's own sig-network e2e specs against svcproxy and both kube-proxy
# modes on the e2e-node cluster; writes docs/conformance.md.
conformance:
	hack/conformance.sh

clean:
	rm -rf bin
