package main

// The base spec step (--base-spec-mount SRC:DST, run once before containerd starts): containerd's CRI plugin
// builds every container's OCI spec from the file its config names as base_runtime_spec (kind's config.toml:
// /etc/containerd/cri-base.json) and adds the pod's own mounts to it. This step adds one read-only bind of the
// node's GPU-stack log socket folder (cluster/sim/kubelet/logsocket.py) there, so that every container on the
// node, gpulab's stand-in program included, can reach the socket. A folder the node does not have is not added (a
// bind of a missing source would stop every container from starting), and a mount already there is kept, so the
// step can run at every boot.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// parseMount reads SRC:DST, both absolute paths.
func parseMount(spec string) (string, string, error) {
	src, dst, ok := strings.Cut(spec, ":")
	if !ok || !filepath.IsAbs(src) || !filepath.IsAbs(dst) {
		return "", "", fmt.Errorf("--base-spec-mount wants SOURCE:DESTINATION, two absolute paths, not %q", spec)
	}
	return filepath.Clean(src), filepath.Clean(dst), nil
}

// addBaseSpecMount adds the bind of src at dst to the OCI spec at path; it returns whether the file changed.
func addBaseSpecMount(path, src, dst string) (bool, error) {
	if info, err := os.Stat(src); err != nil || !info.IsDir() {
		return false, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	mounts, _ := spec["mounts"].([]any)
	for _, m := range mounts {
		if entry, ok := m.(map[string]any); ok && entry["destination"] == dst {
			return false, nil
		}
	}
	spec["mounts"] = append(mounts, map[string]any{
		"destination": dst, "type": "bind", "source": src, "options": []string{"rbind", "ro", "nosuid", "nodev"},
	})
	out, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return false, err
	}
	mode := os.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cri-base-*.json")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(out, '\n')); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), path)
}

// baseSpecStep runs the step for the flags' values and returns the exit code.
func baseSpecStep(path, mount string) int {
	src, dst, err := parseMount(mount)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	changed, err := addBaseSpecMount(path, src, dst)
	if err != nil {
		fmt.Fprintf(os.Stderr, "adding %s to the base runtime spec: %v\n", dst, err)
		return 1
	}
	switch {
	case changed:
		fmt.Printf("every container gets %s at %s (read-only, %s)\n", src, dst, path)
	default:
		fmt.Printf("%s: nothing to add for %s\n", path, dst)
	}
	return 0
}
