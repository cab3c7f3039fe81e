module gpulab.local/coredns

go 1.26.0

require github.com/coredns/coredns v1.14.2
