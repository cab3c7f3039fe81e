// workload: stands in for the lab images (CUDA, Triton, PyTorch, Jupyter, the simulated GPU Operator's operands)
// in the offline kind node image, where they cannot be pulled and no GPU exists. Installed as sleep, sh and bash,
// it does what the labs' containers ask: `sleep N|infinity`, or `sh|bash -c SCRIPT`, where a script that loops or
// sleeps runs until the pod is stopped and any other script exits 0. With no command it sleeps until stopped.
// Meanwhile, on a kind worker, it prints the lines the simulated GPU stack keeps for this container (logstream.go),
// so `kubectl logs` shows what NVIDIA's program would have printed.
package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func forever() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	<-sigs
	os.Exit(0)
}

func main() {
	go newLogFollower(logSocketFolder(), os.Stdout, os.Stderr).run()
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	switch name {
	case "sleep":
		if len(args) == 1 && args[0] != "infinity" {
			if n, err := strconv.ParseFloat(strings.TrimSuffix(args[0], "s"), 64); err == nil {
				go forever()
				time.Sleep(time.Duration(n * float64(time.Second)))
				return
			}
		}
		forever()
	case "sh", "bash":
		if len(args) >= 2 && args[0] == "-c" && !strings.Contains(args[1], "sleep") && !strings.Contains(args[1], "while") {
			return
		}
		forever()
	default:
		forever()
	}
}
