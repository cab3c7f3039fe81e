package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeKubelet is the kubelet's Registration service on kubelet.sock: it records each registration.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	mu   sync.Mutex
	regs []*pluginapi.RegisterRequest
	srv  *grpc.Server
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.regs = append(k.regs, r)
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) registered() []*pluginapi.RegisterRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*pluginapi.RegisterRequest(nil), k.regs...)
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	sock := filepath.Join(dir, "kubelet.sock")
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{srv: grpc.NewServer()}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(lis) }()
	return k
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func dial(t *testing.T, socket string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func healthy(resp *pluginapi.ListAndWatchResponse) (int, int) {
	n := 0
	for _, d := range resp.Devices {
		if d.Health == pluginapi.Healthy {
			n++
		}
	}
	return len(resp.Devices), n
}

func TestRegistersListsAllocatesAndRegistersAgainAfterAKubeletRestart(t *testing.T) {
	dir, err := os.MkdirTemp("", "kp") // short: a unix socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "devices.json")
	writeFile(t, file, `{"resources": {"nvidia.com/gpu": [{"id": "GPU-a", "healthy": true}, {"id": "GPU-b", "healthy": true}],
	  "nvidia.com/gpu.shared": [{"id": "GPU-a::0", "healthy": true}, {"id": "GPU-a::1", "healthy": true}]},
	  "singleRequest": ["nvidia.com/gpu.shared"]}`)
	kubelet := startKubelet(t, dir)
	smiDir := filepath.Join(dir, "nvidia-smi")
	if err := os.Mkdir(smiDir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	os.Args = []string{"kindplugin", "--devices=" + file, "--plugin-dir=" + dir, "--interval=20ms",
		"--smi-binary=" + self, "--smi-dir=" + smiDir}
	go main()

	waitFor(t, "two registrations", func() bool { return len(kubelet.registered()) == 2 })
	byName := map[string]string{}
	for _, r := range kubelet.registered() {
		if r.Version != pluginapi.Version {
			t.Fatalf("registered with version %q", r.Version)
		}
		byName[r.ResourceName] = filepath.Join(dir, r.Endpoint)
	}
	gpu := dial(t, byName["nvidia.com/gpu"])
	stream, err := gpu.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if all, ok := healthy(first); all != 2 || ok != 2 {
		t.Fatalf("first list: %d devices, %d healthy", all, ok)
	}

	// One GPU turns unhealthy: capacity stays 2, allocatable drops to 1.
	writeFile(t, file, `{"resources": {"nvidia.com/gpu": [{"id": "GPU-a", "healthy": true}, {"id": "GPU-b", "healthy": false}]}}`)
	second, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if all, ok := healthy(second); all != 2 || ok != 1 {
		t.Fatalf("after the fault: %d devices, %d healthy", all, ok)
	}

	resp, err := gpu.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != "GPU-a" {
		t.Fatalf("NVIDIA_VISIBLE_DEVICES=%q", got)
	}
	// As NVIDIA's container toolkit injects nvidia-smi: this binary at /usr/bin/nvidia-smi, and the socket folder.
	mounts := map[string]*pluginapi.Mount{}
	for _, m := range resp.ContainerResponses[0].Mounts {
		mounts[m.ContainerPath] = m
	}
	if m := mounts["/usr/bin/nvidia-smi"]; len(mounts) != 2 || m == nil || m.HostPath != self || !m.ReadOnly {
		t.Fatalf("mounts: %v", resp.ContainerResponses[0].Mounts)
	}
	if m := mounts["/run/gpulab/nvidia-smi"]; m == nil || m.HostPath != smiDir || !m.ReadOnly {
		t.Fatalf("socket folder mount: %v", resp.ContainerResponses[0].Mounts)
	}
	// The shared resource left the file: it keeps its registration with no devices (the kubelet shows 0).
	shared := dial(t, byName["nvidia.com/gpu.shared"])
	sharedStream, err := shared.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sharedStream.Recv(); err != nil || len(got.Devices) != 0 {
		t.Fatalf("shared resource after leaving the file: %v, %v", got, err)
	}

	// failRequestsGreaterThanOne: a second replica is refused while the resource is single-request.
	writeFile(t, file, `{"resources": {"nvidia.com/gpu.shared": [{"id": "GPU-a::0", "healthy": true}, {"id": "GPU-a::1", "healthy": true}]},
	  "singleRequest": ["nvidia.com/gpu.shared"]}`)
	waitFor(t, "the shared devices again", func() bool {
		got, err := sharedStream.Recv()
		return err == nil && len(got.Devices) == 2
	})
	// One replica: the container sees its whole GPU (time-slicing shares the GPU, it does not split it).
	one, err := shared.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-a::1"}}}})
	if err != nil || one.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-a" || len(one.ContainerResponses[0].Mounts) != 2 {
		t.Fatalf("one replica: %v, %v", one, err)
	}
	_, err = shared.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-a::0", "GPU-a::1"}}}})
	if err == nil || !strings.Contains(err.Error(), "maximum request size for shared resources is 1; found 2") {
		t.Fatalf("two replicas: %v", err)
	}

	// The kubelet restarts: it wipes the plugin sockets and creates kubelet.sock anew; the plugin registers again.
	kubelet.srv.Stop()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sock") {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	again := startKubelet(t, dir)
	waitFor(t, "registrations after the restart", func() bool { return len(again.registered()) == 2 })
	if _, err := os.Stat(byName["nvidia.com/gpu"]); err != nil {
		t.Fatalf("the plugin's socket is not back: %v", err)
	}
}

func TestNoSmiMountsWithoutTheSocketFolderOrTheBinary(t *testing.T) {
	dir := t.TempDir()
	self, _ := os.Executable()
	if m := smiMounts(self, filepath.Join(dir, "missing")); m != nil {
		t.Fatalf("mounts without a socket folder: %v", m)
	}
	if m := smiMounts(filepath.Join(dir, "missing"), dir); m != nil {
		t.Fatalf("mounts without the binary: %v", m)
	}
	if m := smiMounts("", dir); m != nil {
		t.Fatalf("mounts with no binary named: %v", m)
	}
}

// fakeStack answers one nvidia-smi request on a unix socket with reply, and records the request.
func fakeStack(t *testing.T, socket string, reply string) <-chan smiRequest {
	t.Helper()
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	got := make(chan smiRequest, 1)
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		var req smiRequest
		if err := json.NewDecoder(conn).Decode(&req); err == nil {
			got <- req
		}
		_, _ = conn.Write([]byte(reply + "\n"))
	}()
	return got
}

func TestNvidiaSmiClientPrintsTheStacksAnswer(t *testing.T) {
	dir, err := os.MkdirTemp("", "smi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "smi.sock")
	t.Setenv("GPULAB_NVIDIA_SMI_SOCKET", socket)
	t.Setenv("NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b")
	got := fakeStack(t, socket, `{"stdout": "GPU 0: X\n", "stderr": "warn\n", "exit_code": 3}`)
	var out, errOut strings.Builder
	code := nvidiaSmi([]string{"-L"}, &out, &errOut)
	req := <-got
	if len(req.Args) != 1 || req.Args[0] != "-L" || req.Visible == nil || *req.Visible != "GPU-a,GPU-b" {
		t.Fatalf("request: %+v", req)
	}
	if code != 3 || out.String() != "GPU 0: X\n" || errOut.String() != "warn\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}

	// No stack behind the socket: nvidia-smi's words for a driver it cannot reach, exit 9.
	os.Remove(socket)
	out.Reset()
	if code := nvidiaSmi(nil, &out, &errOut); code != 9 || !strings.HasPrefix(out.String(), "NVIDIA-SMI has failed") {
		t.Fatalf("without the stack: exit %d, %q", code, out.String())
	}
}
