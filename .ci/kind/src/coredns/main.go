// coredns with only the plugins kubeadm's Corefile uses (kubernetes/cmd/kubeadm/app/phases/addons/dns/manifests.go),
// in the order of CoreDNS's plugin.cfg. Built for the offline kind node image, where the upstream image cannot be
// pulled.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	"github.com/coredns/coredns/coremain"
)

func init() {
	dnsserver.Directives = []string{"reload", "ready", "health", "prometheus", "errors", "log", "loadbalance",
		"cache", "kubernetes", "loop", "forward"}
}

func main() { coremain.Run() }
