package main

// The nvidia-smi client: this binary, mounted into a GPU container as /usr/bin/nvidia-smi by Allocate, runs as
// nvidia-smi when called by that name (busybox style). It has no GPU to ask, so it sends its arguments and the
// container's NVIDIA_VISIBLE_DEVICES over the node's unix socket (the folder Allocate mounts at smiSocketDir) to
// the simulated GPU stack on the host (cluster/sim/kubelet/smisocket.py), which answers with what real nvidia-smi
// would print for those devices (the same code that answers `kubectl exec … nvidia-smi` on the local backend), and
// prints that answer as the tool would: stdout, stderr and the exit code. Nothing leaves the unix socket.

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"
)

const (
	smiContainerPath = "/usr/bin/nvidia-smi" // where NVIDIA's container toolkit puts it in a GPU container
	smiSocketDir     = "/run/gpulab/nvidia-smi"
	smiSocketName    = "smi.sock"
	// nvidia-smi when it cannot reach a driver (the same words and exit code 9 as cluster/sim/kubelet/programs.py
	// NO_DRIVER): here, when the GPU stack on the host does not answer.
	smiNoDriver = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that " +
		"the latest NVIDIA driver is installed and running.\n\n"
	smiNoDriverExit = 9
)

type smiRequest struct {
	Args    []string `json:"args"`
	Visible *string  `json:"visible"` // NVIDIA_VISIBLE_DEVICES, null when unset
}

type smiReply struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

// nvidiaSmi runs the client for args; the socket is smiSocketDir's unless GPULAB_NVIDIA_SMI_SOCKET names another
// (tests only). Returns the exit code.
func nvidiaSmi(args []string, stdout, stderr io.Writer) int {
	socket := os.Getenv("GPULAB_NVIDIA_SMI_SOCKET")
	if socket == "" {
		socket = filepath.Join(smiSocketDir, smiSocketName)
	}
	req := smiRequest{Args: args}
	if v, ok := os.LookupEnv("NVIDIA_VISIBLE_DEVICES"); ok {
		req.Visible = &v
	}
	if req.Args == nil {
		req.Args = []string{}
	}
	reply, err := askStack(socket, req)
	if err != nil {
		_, _ = io.WriteString(stdout, smiNoDriver)
		return smiNoDriverExit
	}
	_, _ = io.WriteString(stdout, reply.Stdout)
	_, _ = io.WriteString(stderr, reply.Stderr)
	return reply.ExitCode
}

func askStack(socket string, req smiRequest) (smiReply, error) {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return smiReply{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	line, err := json.Marshal(req)
	if err != nil {
		return smiReply{}, err
	}
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return smiReply{}, err
	}
	var reply smiReply
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&reply); err != nil {
		return smiReply{}, err
	}
	return reply, nil
}
