package main

import (
	"reflect"
	"strings"
	"testing"
)

// The command line splits into one section per --component=, in the order given; flags after a --component= are
// that component's own, and --ready-kubeconfig= is the only flag of ours, before the first --component=.
func TestParseSplitsTheCommandLineIntoComponents(t *testing.T) {
	ready, sections, err := parse([]string{
		"--ready-kubeconfig=/state/admin.kubeconfig",
		"--component=kube-apiserver", "--etcd-servers=http://127.0.0.1:2379", "--secure-port=6443",
		"--component=kube-controller-manager", "--kubeconfig=/state/cm.kubeconfig",
		"--component=kube-scheduler", "--kubeconfig=/state/sched.kubeconfig", "-v=2",
	})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if ready != "/state/admin.kubeconfig" {
		t.Errorf("ready kubeconfig = %q", ready)
	}
	want := []section{
		{name: apiserver, args: []string{"--etcd-servers=http://127.0.0.1:2379", "--secure-port=6443"}},
		{name: controllerManager, args: []string{"--kubeconfig=/state/cm.kubeconfig"}},
		{name: scheduler, args: []string{"--kubeconfig=/state/sched.kubeconfig", "-v=2"}},
	}
	if !reflect.DeepEqual(sections, want) {
		t.Errorf("sections = %#v, want %#v", sections, want)
	}
}

// The API server alone needs no kubeconfig to wait with; a --ready-kubeconfig= after a --component= belongs to
// that component.
func TestParseTheAPIServerAlone(t *testing.T) {
	ready, sections, err := parse([]string{"--component=kube-apiserver", "--ready-kubeconfig=x"})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if ready != "" || len(sections) != 1 || !reflect.DeepEqual(sections[0].args, []string{"--ready-kubeconfig=x"}) {
		t.Errorf("ready = %q, sections = %#v", ready, sections)
	}
}

func TestParseRefusesWhatItCannotRun(t *testing.T) {
	cases := map[string]struct {
		argv []string
		says string
	}{
		"no component":          {nil, "the first component must be --component=kube-apiserver"},
		"scheduler first":       {[]string{"--component=kube-scheduler"}, "the first component must be"},
		"unknown component":     {[]string{"--component=kube-proxy"}, `unknown component "kube-proxy"`},
		"component given twice": {[]string{"--component=kube-apiserver", "--component=kube-apiserver"}, "given twice"},
		"flag before component": {[]string{"--secure-port=6443", "--component=kube-apiserver"}, "unexpected argument"},
		"later component, no kubeconfig": {
			[]string{"--component=kube-apiserver", "--component=kube-scheduler"}, "--ready-kubeconfig is needed"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := parse(c.argv)
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("parse(%q) error = %v, want one saying %q", c.argv, err, c.says)
			}
		})
	}
}
