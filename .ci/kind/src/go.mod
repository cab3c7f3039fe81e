module gpulab.local/kindimage

go 1.26.0
