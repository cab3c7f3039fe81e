package main

import "runtime/debug"

// moduleVersion is the version of github.com/NVIDIA/k8s-device-plugin linked into this binary.
func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == "github.com/NVIDIA/k8s-device-plugin" {
			return dep.Version
		}
	}
	return "unknown"
}
