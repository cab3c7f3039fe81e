// kindnetd-lite: stands in for kind's kindnetd (not served by the Go module proxy) in the offline node image.
// It runs as kind's own kindnet DaemonSet (host network, NET_ADMIN, its ServiceAccount may list nodes): every
// few seconds it lists the Nodes, writes a bridge CNI config for its own node's podCIDR and routes every other
// node's podCIDR via that node's InternalIP. No network policies, no masquerade beyond the bridge plugin's ipMasq.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

type nodeList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			PodCIDR string `json:"podCIDR"`
		} `json:"spec"`
		Status struct {
			Addresses []struct {
				Type    string `json:"type"`
				Address string `json:"address"`
			} `json:"addresses"`
		} `json:"status"`
	} `json:"items"`
}

func client() (*http.Client, string, string) {
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	url := fmt.Sprintf("https://%s:%s", os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return hc, url, ""
}

func list(hc *http.Client, url string) (*nodeList, error) {
	token, err := os.ReadFile(saDir + "/token") // re-read: projected tokens rotate
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequest("GET", url+"/api/v1/nodes", nil)
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("list nodes: HTTP %d", resp.StatusCode)
	}
	var nl nodeList
	return &nl, json.NewDecoder(resp.Body).Decode(&nl)
}

const conf = `{"cniVersion":"0.4.0","name":"kindnet","plugins":[
 {"type":"bridge","bridge":"kind-br0","isGateway":true,"ipMasq":true,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"%s"}]],"routes":[{"dst":"0.0.0.0/0"}]}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
`

func main() {
	hostIP := os.Getenv("HOST_IP")
	hc, url, _ := client()
	written := ""
	for {
		nl, err := list(hc, url)
		if err != nil {
			log.Print(err)
			time.Sleep(2 * time.Second)
			continue
		}
		for _, n := range nl.Items {
			ip := ""
			for _, a := range n.Status.Addresses {
				if a.Type == "InternalIP" {
					ip = a.Address
				}
			}
			if n.Spec.PodCIDR == "" || ip == "" {
				continue
			}
			if ip == hostIP {
				if written != n.Spec.PodCIDR {
					data := fmt.Sprintf(conf, n.Spec.PodCIDR)
					tmp := "/etc/cni/net.d/.10-kindnet.conflist"
					if err := os.WriteFile(tmp, []byte(data), 0o644); err == nil && os.Rename(tmp, "/etc/cni/net.d/10-kindnet.conflist") == nil {
						written = n.Spec.PodCIDR
						log.Printf("CNI config for %s written (%s)", n.Metadata.Name, n.Spec.PodCIDR)
					}
				}
				continue
			}
			if out, err := exec.Command("ip", "route", "replace", n.Spec.PodCIDR, "via", ip).CombinedOutput(); err != nil {
				log.Printf("route %s via %s: %v %s", n.Spec.PodCIDR, ip, err, out)
			}
		}
		time.Sleep(5 * time.Second)
	}
}
