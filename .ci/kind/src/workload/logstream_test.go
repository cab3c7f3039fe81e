package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serve answers each connection with serveOne, recording the offsets the client asked from.
func serve(t *testing.T, socket string, serveOne func(n int, conn net.Conn)) (*[]int64, *sync.Mutex) {
	t.Helper()
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	var asked []int64
	var mu sync.Mutex
	go func() {
		for n := 0; ; n++ {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				conn.Close()
				continue
			}
			var req map[string]int64
			_ = json.Unmarshal([]byte(line), &req)
			mu.Lock()
			asked = append(asked, req["offset"])
			mu.Unlock()
			serveOne(n, conn)
			conn.Close()
		}
	}()
	return &asked, &mu
}

func frame(stream, text string, offset int64) string {
	raw, _ := json.Marshal(logFrame{Stream: stream, Text: text, Offset: offset})
	return string(raw) + "\n"
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// socketDir is a new folder for the test's socket, short enough for a unix socket's path (t.TempDir's is not).
func socketDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/tmp", "wl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestLinesGoToTheirStreamsAndAReconnectAsksFromWhereItStopped(t *testing.T) {
	dir := socketDir(t)
	asked, mu := serve(t, filepath.Join(dir, logSocketName), func(n int, conn net.Conn) {
		if n == 0 { // the stack's first life: two lines, then it goes away
			conn.Write([]byte(frame("stdout", "Starting nvidia-device-plugin\n", 90) +
				frame("stderr", "I1202 main.go:253] Starting FS watcher\n", 180)))
			return
		}
		conn.Write([]byte(frame("stderr", "I1202 main.go:260] Starting OS watcher.\n", 270)))
		time.Sleep(time.Hour) // following: the connection stays open
	})
	var stdout, stderr lockedBuffer
	f := newLogFollower(dir, &stdout, &stderr)
	f.retry = 10 * time.Millisecond
	go f.run()
	waitFor(t, "the third line", func() bool { return strings.Contains(stderr.String(), "OS watcher") })
	if stdout.String() != "Starting nvidia-device-plugin\n" {
		t.Fatalf("stdout %q", stdout.String())
	}
	if stderr.String() != "I1202 main.go:253] Starting FS watcher\nI1202 main.go:260] Starting OS watcher.\n" {
		t.Fatalf("stderr %q", stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(*asked) != 2 || (*asked)[0] != 0 || (*asked)[1] != 180 {
		t.Fatalf("offsets asked: %v", *asked)
	}
}

func TestAnErrorPrintsNothingAndIsTriedAgain(t *testing.T) {
	dir := socketDir(t)
	asked, mu := serve(t, filepath.Join(dir, logSocketName), func(n int, conn net.Conn) {
		if n < 2 {
			conn.Write([]byte(`{"error": "no pod on a100-1 has container 0123456789ab in its status"}` + "\n"))
			return
		}
		conn.Write([]byte(frame("stdout", "at last\n", 42)))
		time.Sleep(time.Hour)
	})
	var stdout, stderr lockedBuffer
	f := newLogFollower(dir, &stdout, &stderr)
	f.retry, f.maxWait = 5*time.Millisecond, 20*time.Millisecond
	go f.run()
	waitFor(t, "the line after two refusals", func() bool { return stdout.String() == "at last\n" })
	if stderr.String() != "" {
		t.Fatalf("stderr %q", stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(*asked) != 3 || (*asked)[2] != 0 {
		t.Fatalf("offsets asked: %v", *asked)
	}
}

func TestNoFolderNoFollowing(t *testing.T) {
	var out lockedBuffer
	f := newLogFollower(filepath.Join(t.TempDir(), "absent"), &out, &out)
	done := make(chan struct{})
	go func() { f.run(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the follower kept trying where no folder is")
	}
	if out.String() != "" {
		t.Fatalf("printed %q", out.String())
	}
}
