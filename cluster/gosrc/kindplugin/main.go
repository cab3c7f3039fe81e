// Command kindplugin is gpulab's device plugin for kind nodes: it registers the simulated NVIDIA resources with
// the node's real kubelet over the kubelet device-plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), so
// that the kubelet itself owns their capacity and allocatable, as it does on a GPU node with NVIDIA's plugin.
//
// Its source of truth is a JSON file the simulated GPU stack writes on the host (cluster/sim/gpu/devicefile.py),
// which kind mounts into the node:
//
//	{"resources": {"nvidia.com/gpu": [{"id": "GPU-...", "healthy": true}, ...], ...},
//	 "singleRequest": ["nvidia.com/gpu.shared"]}
//
// As NVIDIA's plugin does (k8s-device-plugin internal/plugin/server.go), each resource name is one registration
// with its own socket under /var/lib/kubelet/device-plugins; ListAndWatch sends the device list again whenever
// the file changes; Allocate returns the device IDs as NVIDIA_VISIBLE_DEVICES (there is no real GPU to mount) and
// refuses a request for more than one device of a resource named in "singleRequest" (failRequestsGreaterThanOne,
// internal/rm/rm.go ValidateRequest). A resource that leaves the file keeps its registration with no devices, so
// the kubelet reports it as 0. When the kubelet restarts it deletes the sockets and creates kubelet.sock anew:
// the plugin notices either, serves again and registers again.
//
// Allocate also hands the container what NVIDIA's container toolkit injects into a GPU container: an nvidia-smi at
// /usr/bin/nvidia-smi. Here that is this same binary (mounted from the node, read-only), which acts as the
// nvidia-smi client when it is run under that name (nvidiasmi.go), plus the folder of the node's nvidia-smi socket,
// through which the simulated GPU stack on the host answers for the devices in the container's
// NVIDIA_VISIBLE_DEVICES.
//
// Run with --base-spec-mount before containerd starts, it instead adds the node's GPU-stack log socket folder to
// the base runtime spec of every container (basespec.go) and exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type device struct {
	ID      string `json:"id"`
	Healthy bool   `json:"healthy"`
}

type state struct {
	Resources     map[string][]device `json:"resources"`
	SingleRequest []string            `json:"singleRequest"`
}

// resourceServer serves one resource name on its own socket.
type resourceServer struct {
	pluginapi.UnimplementedDevicePluginServer
	name              string
	socket            string
	server            *grpc.Server
	smiBinary, smiDir string // what every allocation mounts into the container (smiMounts)

	mu      sync.Mutex
	devices []device
	single  bool
	changed chan struct{} // closed and replaced on every change
}

func newResourceServer(name, dir string) *resourceServer {
	file := "gpulab-" + strings.NewReplacer("/", "-", ".", "-").Replace(name) + ".sock"
	return &resourceServer{name: name, socket: filepath.Join(dir, file), changed: make(chan struct{})}
}

func (r *resourceServer) set(devs []device, single bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.devices, r.single = devs, single
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *resourceServer) snapshot() ([]device, bool, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]device(nil), r.devices...), r.single, r.changed
}

func (r *resourceServer) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (r *resourceServer) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		devs, _, changed := r.snapshot()
		resp := &pluginapi.ListAndWatchResponse{}
		for _, d := range devs {
			health := pluginapi.Healthy
			if !d.Healthy {
				health = pluginapi.Unhealthy
			}
			resp.Devices = append(resp.Devices, &pluginapi.Device{ID: d.ID, Health: health})
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (r *resourceServer) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (r *resourceServer) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	_, single, _ := r.snapshot()
	mounts := smiMounts(r.smiBinary, r.smiDir)
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		if single && len(c.DevicesIds) > 1 {
			// The message NVIDIA's plugin returns (internal/rm/rm.go ValidateRequest, wrapped by Allocate).
			return nil, fmt.Errorf("invalid allocation request for %q: invalid request: maximum request size for "+
				"shared resources is 1; found %d", r.name, len(c.DevicesIds))
		}
		ids := make([]string, 0, len(c.DevicesIds))
		for _, id := range c.DevicesIds {
			ids = append(ids, strings.SplitN(id, "::", 2)[0]) // a shared replica <id>::<i> names its GPU
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:   map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ",")},
			Mounts: mounts,
		})
	}
	return resp, nil
}

func (r *resourceServer) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve (re)starts the gRPC server on the resource's socket and registers it with the kubelet.
func (r *resourceServer) serve(kubeletSocket string) error {
	r.stop()
	_ = os.Remove(r.socket)
	lis, err := net.Listen("unix", r.socket)
	if err != nil {
		return err
	}
	r.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(r.server, r)
	go func(s *grpc.Server) { _ = s.Serve(lis) }(r.server)
	conn, err := grpc.NewClient("unix://"+kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(r.socket), ResourceName: r.name,
		Options: &pluginapi.DevicePluginOptions{},
	})
	return err
}

func (r *resourceServer) stop() {
	if r.server != nil {
		r.server.Stop()
		r.server = nil
	}
}

func (r *resourceServer) socketGone() bool {
	_, err := os.Stat(r.socket)
	return err != nil
}

// inode identifies one incarnation of kubelet.sock (0 when it is absent).
func inode(path string) uint64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 1
}

func readState(path string) (state, []byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return state{}, nil, err
	}
	var s state
	if err := json.Unmarshal(raw, &s); err != nil {
		return state{}, raw, fmt.Errorf("%s: %w", path, err)
	}
	return s, raw, nil
}

// smiMounts is what Allocate mounts into every container it gives devices: this binary as /usr/bin/nvidia-smi and
// the node's nvidia-smi socket folder, both read-only (nothing when either is missing on the node, or smiBinary
// is empty).
func smiMounts(smiBinary, smiDir string) []*pluginapi.Mount {
	if smiBinary == "" || smiDir == "" {
		return nil
	}
	if _, err := os.Stat(smiBinary); err != nil {
		return nil
	}
	if info, err := os.Stat(smiDir); err != nil || !info.IsDir() {
		return nil
	}
	return []*pluginapi.Mount{
		{ContainerPath: smiContainerPath, HostPath: smiBinary, ReadOnly: true},
		{ContainerPath: smiSocketDir, HostPath: smiDir, ReadOnly: true},
	}
}

func main() {
	if filepath.Base(os.Args[0]) == "nvidia-smi" {
		os.Exit(nvidiaSmi(os.Args[1:], os.Stdout, os.Stderr))
	}
	devicesFile := flag.String("devices", "/etc/gpulab/devices/devices.json", "the JSON file the GPU stack writes")
	dir := flag.String("plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory")
	interval := flag.Duration("interval", 300*time.Millisecond, "how often to look at the file and kubelet.sock")
	smiBinary := flag.String("smi-binary", "/usr/local/bin/gpulab-device-plugin",
		"this binary on the node, mounted into GPU containers as /usr/bin/nvidia-smi (empty: mount nothing)")
	smiDir := flag.String("smi-dir", "/etc/gpulab/devices/nvidia-smi",
		"the node's folder holding the GPU stack's nvidia-smi socket, mounted into GPU containers")
	baseSpec := flag.String("base-spec", "/etc/containerd/cri-base.json", "containerd's CRI base runtime spec")
	baseSpecMount := flag.String("base-spec-mount", "",
		"SOURCE:DESTINATION: add a read-only bind to the base runtime spec and exit (basespec.go)")
	flag.Parse()
	if *baseSpecMount != "" {
		os.Exit(baseSpecStep(*baseSpec, *baseSpecMount))
	}
	kubeletSocket := filepath.Join(*dir, "kubelet.sock")

	servers := map[string]*resourceServer{}
	registered := map[string]uint64{} // resource -> kubelet.sock inode it registered with
	var last []byte
	for ; ; time.Sleep(*interval) {
		s, raw, err := readState(*devicesFile)
		if err != nil && !os.IsNotExist(err) && string(raw) != string(last) {
			log.Printf("ignoring the devices file: %v", err)
			last = raw
		}
		if err == nil && string(raw) != string(last) {
			last = raw
			single := map[string]bool{}
			for _, n := range s.SingleRequest {
				single[n] = true
			}
			names := make([]string, 0, len(s.Resources))
			for n := range s.Resources {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if servers[n] == nil {
					servers[n] = newResourceServer(n, *dir)
					servers[n].smiBinary, servers[n].smiDir = *smiBinary, *smiDir
				}
			}
			for n, srv := range servers { // a resource no longer listed keeps its registration with no devices
				srv.set(s.Resources[n], single[n])
			}
			log.Printf("devices: %s", summary(s))
		}
		kubelet := inode(kubeletSocket)
		if kubelet == 0 {
			continue
		}
		for n, srv := range servers {
			if registered[n] == kubelet && !srv.socketGone() {
				continue
			}
			if err := srv.serve(kubeletSocket); err != nil {
				log.Printf("registering %s: %v", n, err)
				delete(registered, n)
				continue
			}
			registered[n] = kubelet
			log.Printf("registered %s with the kubelet (%s)", n, srv.socket)
		}
	}
}

func summary(s state) string {
	parts := []string{}
	for n, devs := range s.Resources {
		healthy := 0
		for _, d := range devs {
			if d.Healthy {
				healthy++
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d healthy", n, healthy, len(devs)))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
