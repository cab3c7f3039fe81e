// Command kube-control-plane runs kube-apiserver, kube-controller-manager and kube-scheduler in one process.
//
// Each component is the upstream code, started from its own command with its own flags, as its own binary would
// (k8s.io/kubernetes/cmd/<component>). One process instead of three shares the Go runtime and the program code the
// three have in common (client-go, apimachinery, the API types): an idle lab cluster's resident memory drops by
// about a third (docs/local-backend.md). k3s runs the same components in one process the same way.
//
// Usage:
//
//	kube-control-plane [--ready-kubeconfig=FILE] --component=kube-apiserver FLAGS... \
//	    [--component=kube-controller-manager FLAGS...] [--component=kube-scheduler FLAGS...]
//
// The API server starts first; the others start once its /readyz answers ok (read with the kubeconfig given), as
// they would otherwise fail on a server whose RBAC roles are not yet bootstrapped. The process ends when any
// component ends: exit status 0 after SIGTERM or SIGINT, 1 when a component failed.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // for CronJob time zones, as kube-apiserver and kube-controller-manager load it

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

const (
	apiserver         = "kube-apiserver"
	controllerManager = "kube-controller-manager"
	scheduler         = "kube-scheduler"
)

// schedulerCommand is kube-scheduler's command (cmd/kube-scheduler/app.NewSchedulerCommand) without its own
// signal handler: k8s.io/apiserver's SetupSignalHandler may be called once per process, and the API server's
// command has called it. The scheduler stops with the context this process cancels on SIGTERM instead.
func schedulerCommand() *cobra.Command {
	opts := schedoptions.NewOptions()
	cmd := &cobra.Command{
		Use:          scheduler,
		SilenceUsage: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
			if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
				return err
			}
			cc, sched, err := schedapp.Setup(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return schedapp.Run(cmd.Context(), cc, sched)
		},
	}
	nfs := opts.Flags
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, f := range nfs.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	return cmd
}

type section struct {
	name string
	args []string
}

func parse(argv []string) (readyKubeconfig string, sections []section, err error) {
	known := map[string]bool{apiserver: true, controllerManager: true, scheduler: true}
	for _, a := range argv {
		switch {
		case strings.HasPrefix(a, "--component="):
			name := strings.TrimPrefix(a, "--component=")
			if !known[name] {
				return "", nil, fmt.Errorf("unknown component %q (known: %s, %s, %s)",
					name, apiserver, controllerManager, scheduler)
			}
			for _, s := range sections {
				if s.name == name {
					return "", nil, fmt.Errorf("component %q given twice", name)
				}
			}
			sections = append(sections, section{name: name})
		case len(sections) > 0:
			sections[len(sections)-1].args = append(sections[len(sections)-1].args, a)
		case strings.HasPrefix(a, "--ready-kubeconfig="):
			readyKubeconfig = strings.TrimPrefix(a, "--ready-kubeconfig=")
		default:
			return "", nil, fmt.Errorf("unexpected argument %q before the first --component=", a)
		}
	}
	if len(sections) == 0 || sections[0].name != apiserver {
		return "", nil, errors.New("the first component must be --component=kube-apiserver")
	}
	if len(sections) > 1 && readyKubeconfig == "" {
		return "", nil, errors.New("--ready-kubeconfig is needed to start components after the API server")
	}
	return readyKubeconfig, sections, nil
}

// waitReady polls the API server's /readyz until it answers ok, the context ends or a component fails.
func waitReady(ctx context.Context, kubeconfig string, failed <-chan struct{}) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-failed:
			return errors.New("a component ended first")
		case <-tick.C:
		}
	}
}

// cpuTime is the CPU time this process has used so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Idle and busy, in CPU time used per second of wall time.
const (
	busyAbove = 500 * time.Millisecond
	idleBelow = 200 * time.Millisecond
	idleFor   = 5 // seconds below idleBelow before the process goes down to one processor
)

// adaptProcs runs Go code on one processor while the process is idle and on every core while it is busy.
// With more than one processor, each timer or watch event that wakes an idle Go program also wakes a second
// thread to look for work (the runtime's spinning threads): for an idle lab cluster that was ~3 of its ~25
// millicores (docs/bench.md). Start-up, a lab's burst of pods and a 1,000-node fleet get every core, as
// the API server always had. A GOMAXPROCS set in the environment is left alone.
func adaptProcs(ctx context.Context) {
	busy := runtime.GOMAXPROCS(0)
	if busy <= 1 || os.Getenv("GOMAXPROCS") != "" {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, quiet := cpuTime(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := cpuTime()
		used := now - last
		last = now
		switch {
		case used > busyAbove:
			quiet = 0
			if runtime.GOMAXPROCS(0) != busy {
				runtime.GOMAXPROCS(busy)
			}
		case used < idleBelow:
			quiet++
			if quiet >= idleFor && runtime.GOMAXPROCS(0) != 1 {
				runtime.GOMAXPROCS(1)
			}
		default:
			quiet = 0
		}
	}
}

func main() {
	readyKubeconfig, sections, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-control-plane: %v\n", err)
		os.Exit(2)
	}
	// The three commands apply the same logging configuration (the same -v): the second and third application is
	// allowed when unchanged (k8s.io/component-base/logs/api/v1, ReapplyHandling).
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	makers := map[string]func() *cobra.Command{
		apiserver:         apiserverapp.NewAPIServerCommand, // sets up the process's SIGTERM handling for itself
		controllerManager: kcmapp.NewControllerManagerCommand,
		scheduler:         schedulerCommand,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(sections))
	failed := make(chan struct{})
	start := func(s section) {
		cmd := makers[s.name]()
		cmd.SetArgs(s.args)
		go func() { results <- result{s.name, cmd.ExecuteContext(ctx)} }()
	}
	start(sections[0])
	go adaptProcs(ctx)
	if len(sections) > 1 {
		go func() {
			// main closes failed once a component has ended: the API server failed before /readyz said ok.
			if err := waitReady(ctx, readyKubeconfig, failed); err != nil {
				return
			}
			for _, s := range sections[1:] {
				start(s)
			}
		}()
	}
	first := <-results
	close(failed)
	if ctx.Err() != nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "kube-control-plane: %s ended: %v\n", first.name, first.err)
	os.Exit(1)
}
