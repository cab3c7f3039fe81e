package main

// The GPU stack's log lines for this container: on a kind worker every container sees the node's log socket
// folder read-only at logSocketDir (kindplugin's base spec step), where the simulated GPU stack on the host serves
// what the container would print if it were NVIDIA's program (cluster/sim/kubelet/logsocket.py). The stack knows
// which container connects from the connection itself, so the request carries only how much of the log this
// process has printed already. Each line is printed to the stream it was written to, so the real kubelet's
// `kubectl logs` (follow, --tail, --previous, -c) shows it. Where the folder is missing (not a kind worker, the
// control plane) nothing happens; a socket not served yet, or a stack that restarts, is tried again.

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
	logSocketDir  = "/run/gpulab/logs"
	logSocketName = "logs.sock"
	maxFrame      = 1 << 20
)

type logFrame struct {
	Stream string `json:"stream"`
	Text   string `json:"text"`
	Offset int64  `json:"offset"`
	Error  string `json:"error"`
}

type logFollower struct {
	socket         string
	stdout, stderr io.Writer
	offset         int64 // bytes of this container's log printed so far
	retry, maxWait time.Duration
}

// logSocketFolder is logSocketDir, or the folder GPULAB_LOG_SOCKET_DIR names (tests only).
func logSocketFolder() string {
	if dir := os.Getenv("GPULAB_LOG_SOCKET_DIR"); dir != "" {
		return dir
	}
	return logSocketDir
}

func newLogFollower(dir string, stdout, stderr io.Writer) *logFollower {
	return &logFollower{socket: filepath.Join(dir, logSocketName), stdout: stdout, stderr: stderr,
		retry: time.Second, maxWait: 30 * time.Second}
}

// run follows the log until the folder is gone (or never was there); it returns only then.
func (f *logFollower) run() {
	wait := f.retry
	for {
		if info, err := os.Stat(filepath.Dir(f.socket)); err != nil || !info.IsDir() {
			return
		}
		printed, err := f.once()
		if printed {
			wait = f.retry
		} else if err != nil {
			wait = min(wait*2, f.maxWait)
		}
		time.Sleep(wait)
	}
}

// once makes one connection and prints what it is sent; it reports whether it printed anything.
func (f *logFollower) once() (bool, error) {
	conn, err := net.DialTimeout("unix", f.socket, 5*time.Second)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	req, _ := json.Marshal(map[string]int64{"offset": f.offset})
	if _, err := conn.Write(append(req, '\n')); err != nil {
		return false, err
	}
	printed := false
	scanner := bufio.NewScanner(conn)
	scanner.Buffer(make([]byte, 64*1024), maxFrame)
	for scanner.Scan() {
		var fr logFrame
		if err := json.Unmarshal(scanner.Bytes(), &fr); err != nil {
			return printed, err
		}
		if fr.Error != "" {
			return printed, errString(fr.Error)
		}
		out := f.stdout
		if fr.Stream == "stderr" {
			out = f.stderr
		}
		if _, err := io.WriteString(out, fr.Text); err != nil {
			return printed, err
		}
		f.offset, printed = fr.Offset, true
	}
	return printed, scanner.Err()
}

type errString string

func (e errString) Error() string { return string(e) }
