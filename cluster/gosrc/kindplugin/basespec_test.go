package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

const kindBase = `{"ociVersion": "1.1.0", "process": {"cwd": "/"}, "hooks": {"createContainer": [{"path": "/kind/bin/mount-product-files.sh"}]},
 "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}]}`

func readSpec(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestBaseSpecGetsTheBindOnceAndKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	path, src := filepath.Join(dir, "cri-base.json"), filepath.Join(dir, "pod-logs")
	if err := os.WriteFile(path, []byte(kindBase), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	changed, err := addBaseSpecMount(path, src, "/run/gpulab/logs")
	if err != nil || !changed {
		t.Fatalf("first run: changed=%v err=%v", changed, err)
	}
	spec := readSpec(t, path)
	mounts := spec["mounts"].([]any)
	if len(mounts) != 2 {
		t.Fatalf("mounts: %v", mounts)
	}
	added := mounts[1].(map[string]any)
	if added["destination"] != "/run/gpulab/logs" || added["source"] != src || added["type"] != "bind" {
		t.Fatalf("added: %v", added)
	}
	opts := added["options"].([]any)
	if opts[0] != "rbind" || opts[1] != "ro" {
		t.Fatalf("options: %v", opts)
	}
	if spec["hooks"] == nil || spec["ociVersion"] != "1.1.0" {
		t.Fatalf("the rest of the spec is lost: %v", spec)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", info.Mode())
	}
	changed, err = addBaseSpecMount(path, src, "/run/gpulab/logs")
	if err != nil || changed {
		t.Fatalf("second run (next boot): changed=%v err=%v", changed, err)
	}
	if n := len(readSpec(t, path)["mounts"].([]any)); n != 2 {
		t.Fatalf("mounts after a second run: %d", n)
	}
}

func TestAMissingFolderAddsNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cri-base.json")
	if err := os.WriteFile(path, []byte(kindBase), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := addBaseSpecMount(path, filepath.Join(dir, "absent"), "/run/gpulab/logs")
	if err != nil || changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != kindBase {
		t.Fatalf("the spec changed: %s", raw)
	}
}

func TestBadInputIsAMessage(t *testing.T) {
	for _, bad := range []string{"", "/a", "relative:/b", "/a:relative"} {
		if _, _, err := parseMount(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cri-base.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := addBaseSpecMount(path, dir, "/run/gpulab/logs"); err == nil {
		t.Fatal("a broken spec was accepted")
	}
	if code := baseSpecStep(path, "nope"); code != 2 {
		t.Fatalf("exit %d", code)
	}
	if code := baseSpecStep(path, dir+":/run/gpulab/logs"); code != 1 {
		t.Fatalf("exit %d", code)
	}
}
