// Command dpcheck decodes NVIDIA device-plugin config files with NVIDIA's own code, as the plugin does.
//
// It is the referee of gpulab's Python decoder (cluster/gpu/device_plugin_config.py): built against
// github.com/NVIDIA/k8s-device-plugin at the version pinned in cluster/versions.py, it loads each config
// through api/config/v1.NewConfig (sigs.k8s.io/yaml into v1.Config, the version check, the CLI-flag
// precedence), then applies what the plugin's startPlugins does next: loadConfig drops the GFD flags,
// DisableResourceNamingInConfig neutralises rename/devices, and validateFlags (copied below from
// cmd/nvidia-device-plugin/main.go, which is package main and cannot be imported) checks the flags.
//
// Input: JSON lines {"id": "...", "text": "<config file>", "args": ["--mig-strategy=mixed", ...]}.
// Output: one JSON line per input, in order:
//
//	{"id": "...", "ok": bool, "error": "<the line the plugin logs before exiting>", "config": {...},
//	 "warnings": ["<klog warnings>"], "dropped": ["sharing.timeslicing.resources[0].replica", ...]}
//
// "config" is the effective config as the plugin would print it ("Running with config"), before the
// default resources from NVML are added. "dropped" lists the input keys no Go field or decoder reads.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	cli "github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

type request struct {
	ID   string   `json:"id"`
	Text string   `json:"text"`
	Args []string `json:"args"`
}

type answer struct {
	ID       string          `json:"id"`
	OK       bool            `json:"ok"`
	Error    string          `json:"error,omitempty"`
	Config   json.RawMessage `json:"config,omitempty"`
	Warnings []string        `json:"warnings"`
	Dropped  []string        `json:"dropped"`
}

// pluginFlags are the config-related flags of cmd/nvidia-device-plugin/main.go (names, defaults, env vars).
func pluginFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mig-strategy", Value: spec.MigStrategyNone, EnvVars: []string{"MIG_STRATEGY"}},
		&cli.BoolFlag{Name: "fail-on-init-error", Value: true, EnvVars: []string{"FAIL_ON_INIT_ERROR"}},
		&cli.StringFlag{Name: "driver-root", Aliases: []string{"nvidia-driver-root"}, Value: "/", EnvVars: []string{"NVIDIA_DRIVER_ROOT"}},
		&cli.StringFlag{Name: "dev-root", Aliases: []string{"nvidia-dev-root"}, EnvVars: []string{"NVIDIA_DEV_ROOT"}},
		&cli.BoolFlag{Name: "pass-device-specs", Value: false, EnvVars: []string{"PASS_DEVICE_SPECS"}},
		&cli.StringSliceFlag{Name: "device-list-strategy", Value: cli.NewStringSlice(string(spec.DeviceListStrategyEnvVar)), EnvVars: []string{"DEVICE_LIST_STRATEGY"}},
		&cli.StringFlag{Name: "device-id-strategy", Value: spec.DeviceIDStrategyUUID, EnvVars: []string{"DEVICE_ID_STRATEGY"}},
		&cli.BoolFlag{Name: "gdrcopy-enabled", Value: true, EnvVars: []string{"GDRCOPY_ENABLED"}},
		&cli.BoolFlag{Name: "gds-enabled", Value: true, EnvVars: []string{"GDS_ENABLED"}},
		&cli.BoolFlag{Name: "mofed-enabled", Value: true, EnvVars: []string{"MOFED_ENABLED"}},
		&cli.StringFlag{Name: "cdi-annotation-prefix", Value: spec.DefaultCDIAnnotationPrefix, EnvVars: []string{"CDI_ANNOTATION_PREFIX"}},
		&cli.StringFlag{Name: "nvidia-cdi-hook-path", Aliases: []string{"nvidia-ctk-path"}, Value: spec.DefaultNvidiaCTKPath, EnvVars: []string{"NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH"}},
		&cli.StringFlag{Name: "driver-root-ctr-path", Aliases: []string{"container-driver-root"}, Value: spec.DefaultContainerDriverRoot, EnvVars: []string{"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"}},
		&cli.StringFlag{Name: "mps-root", EnvVars: []string{"MPS_ROOT"}},
		&cli.StringFlag{Name: "device-discovery-strategy", Value: "auto", EnvVars: []string{"DEVICE_DISCOVERY_STRATEGY"}},
		&cli.IntSliceFlag{Name: "imex-channel-ids", EnvVars: []string{"IMEX_CHANNEL_IDS"}},
		&cli.BoolFlag{Name: "imex-required", EnvVars: []string{"IMEX_REQUIRED"}},
		&cli.StringFlag{Name: "config-file", EnvVars: []string{"CONFIG_FILE"}},
	}
}

// validateFlags is cmd/nvidia-device-plugin/main.go validateFlags without the NVML probe (the CDI
// strategies need NVML on the node; gpulab's nodes always have it).
func validateFlags(config *spec.Config) error {
	_, err := spec.NewDeviceListStrategies(*config.Flags.Plugin.DeviceListStrategy)
	if err != nil {
		return fmt.Errorf("invalid --device-list-strategy option: %v", err)
	}
	if *config.Flags.Plugin.DeviceIDStrategy != spec.DeviceIDStrategyUUID && *config.Flags.Plugin.DeviceIDStrategy != spec.DeviceIDStrategyIndex {
		return fmt.Errorf("invalid --device-id-strategy option: %v", *config.Flags.Plugin.DeviceIDStrategy)
	}
	if config.Sharing.SharingStrategy() == spec.SharingStrategyMPS {
		if *config.Flags.MigStrategy == spec.MigStrategyMixed {
			return fmt.Errorf("using --mig-strategy=mixed is not supported with MPS")
		}
		if config.Flags.MpsRoot == nil || *config.Flags.MpsRoot == "" {
			return fmt.Errorf("using MPS requires --mps-root to be specified")
		}
	}
	switch *config.Flags.DeviceDiscoveryStrategy {
	case "auto", "nvml", "tegra":
	default:
		return fmt.Errorf("invalid --device-discovery-strategy option %v", *config.Flags.DeviceDiscoveryStrategy)
	}
	switch *config.Flags.MigStrategy {
	case spec.MigStrategyNone, spec.MigStrategySingle, spec.MigStrategyMixed:
	default:
		return fmt.Errorf("unknown MIG strategy: %v", *config.Flags.MigStrategy)
	}
	if err := spec.AssertChannelIDsValid(config.Imex.ChannelIDs); err != nil {
		return fmt.Errorf("invalid IMEX channel IDs: %w", err)
	}
	return nil
}

// load runs the plugin's startPlugins up to its first use of NVML; the error is what main logs.
func load(path string, args []string) (*spec.Config, error) {
	var config *spec.Config
	var failure error
	app := cli.NewApp()
	app.Flags = pluginFlags()
	app.Action = func(c *cli.Context) error {
		cfg, err := spec.NewConfig(c, app.Flags)
		if err != nil {
			return fmt.Errorf("error starting plugins: unable to load config: unable to finalize config: %v", err)
		}
		cfg.Flags.GFD = nil
		spec.DisableResourceNamingInConfig(cfg)
		if err := validateFlags(cfg); err != nil {
			return fmt.Errorf("error starting plugins: unable to validate flags: %v", err)
		}
		config = cfg
		return nil
	}
	failure = app.Run(append([]string{"nvidia-device-plugin", "--config-file", path}, args...))
	return config, failure
}

// unmarshalKeys: keys read by hand-written UnmarshalJSON methods (exact, case-sensitive map lookups).
var unmarshalKeys = map[string][]string{
	"ReplicatedResources": {"renameByDefault", "failRequestsGreaterThanOne", "resources"},
	"ReplicatedResource":  {"name", "devices", "replicas", "rename"},
	"Resource":            {"pattern", "name"},
}

type field struct {
	name string
	typ  reflect.Type
}

func structFields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" {
			out = append(out, structFields(deref(f.Type))...)
			continue
		}
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, field{name, f.Type})
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

var unmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// dropped walks the decoded JSON beside the Go type: struct keys match as encoding/json matches them
// (exact, else case-insensitive); types with their own UnmarshalJSON read only the keys listed above.
func dropped(value any, t reflect.Type, path string, out *[]string) {
	t = deref(t)
	switch v := value.(type) {
	case map[string]any:
		var known []field
		if keys, ok := unmarshalKeys[t.Name()]; ok && reflect.PointerTo(t).Implements(unmarshaler) {
			fields := map[string]reflect.Type{}
			for _, f := range structFields(t) {
				fields[strings.ToLower(f.name)] = f.typ
			}
			for k, sub := range v {
				found := false
				for _, key := range keys {
					if k == key {
						found = true
						ft := fields[strings.ToLower(key)]
						if ft == nil {
							ft = reflect.TypeOf("")
						}
						dropped(sub, ft, join(path, k), out)
					}
				}
				if !found {
					*out = append(*out, join(path, k))
				}
			}
			return
		}
		if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshaler) {
			return
		}
		known = structFields(t)
		for k, sub := range v {
			var match *field
			for i := range known {
				if known[i].name == k {
					match = &known[i]
					break
				}
			}
			if match == nil {
				for i := range known {
					if strings.EqualFold(known[i].name, k) {
						match = &known[i]
						break
					}
				}
			}
			if match == nil {
				*out = append(*out, join(path, k))
				continue
			}
			dropped(sub, match.typ, join(path, k), out)
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return
		}
		for i, item := range v {
			dropped(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func check(dir string, n int, req request) answer {
	ans := answer{ID: req.ID, Warnings: []string{}, Dropped: []string{}}
	path := fmt.Sprintf("%s/config-%d.yaml", dir, n)
	if err := os.WriteFile(path, []byte(req.Text), 0o600); err != nil {
		ans.Error = "bad input: " + err.Error()
		return ans
	}
	defer os.Remove(path)
	var warnings bytes.Buffer
	klog.SetOutput(&warnings)
	config, err := load(path, req.Args)
	klog.Flush()
	seen := map[string]bool{}
	for _, line := range strings.Split(warnings.String(), "\n") {
		// klog writes a warning once per severity it covers (WARNING and INFO): keep each line once.
		if i := strings.Index(line, "] "); i >= 0 && !seen[line] {
			seen[line] = true
			ans.Warnings = append(ans.Warnings, line[i+2:])
		}
	}
	if err != nil {
		ans.Error = err.Error()
		return ans
	}
	ans.OK = true
	ans.Config, _ = json.Marshal(config)
	if raw, err := yaml.YAMLToJSON([]byte(req.Text)); err == nil {
		var generic any
		if json.Unmarshal(raw, &generic) == nil {
			dropped(generic, reflect.TypeOf(spec.Config{}), "", &ans.Dropped)
		}
	}
	sort.Strings(ans.Dropped)
	return ans
}

func main() {
	version := flag.Bool("version", false, "print the k8s-device-plugin module version this was built against")
	flag.Parse()
	if *version {
		fmt.Println(moduleVersion())
		return
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	_ = klogFlags.Set("alsologtostderr", "false")
	_ = klogFlags.Set("skip_headers", "false")
	dir, err := os.MkdirTemp("", "dpcheck-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "dpcheck:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	n := 0
	for in.Scan() {
		var req request
		var ans answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			ans = answer{ID: req.ID, Error: "bad input: " + err.Error(), Warnings: []string{}, Dropped: []string{}}
		} else {
			n++
			ans = check(dir, n, req)
		}
		if err := enc.Encode(ans); err != nil {
			fmt.Fprintln(os.Stderr, "dpcheck: write:", err)
			os.Exit(1)
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "dpcheck: flush:", err)
		os.Exit(1)
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "dpcheck: read:", err)
		os.Exit(1)
	}
}
