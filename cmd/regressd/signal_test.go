package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunStopsCleanlyOnSIGTERM runs the real binary on the embedded default,
// stops it with SIGTERM, and starts it again on the same data dir.
func TestRunStopsCleanlyOnSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "regressd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "regressd-sig-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	for round := 0; round < 2; round++ {
		cmd := exec.Command(bin, "run", "--data-dir", filepath.Join(dir, "data"), "--http-addr", "127.0.0.1:0", "--gateway-addr", "127.0.0.1:0")
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if strings.Contains(sc.Text(), "regressd ready") {
					ready <- ""
				}
			}
			ready <- strings.Join(lines, "\n")
		}()
		select {
		case out := <-ready:
			if out != "" {
				t.Fatalf("round %d: exited before ready:\n%s", round, out)
			}
		case <-time.After(90 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("round %d: not ready in 90s", round)
		}
		pid := readPostmasterPID(t, filepath.Join(dir, "data", "postgres"))
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: exit after SIGTERM: %v", round, err)
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("round %d: still running 60s after SIGTERM", round)
		}
		if pid > 0 && running(pid, 5*time.Second) {
			t.Fatalf("round %d: private postgres (pid %d) still running after exit", round, pid)
		}
	}
}

func readPostmasterPID(t *testing.T, pgDir string) int {
	b, err := os.ReadFile(filepath.Join(pgDir, "postmaster.pid"))
	if err != nil {
		return 0 // the cluster may live outside the data dir when running as root
	}
	var pid int
	for _, c := range strings.SplitN(string(b), "\n", 2)[0] {
		pid = pid*10 + int(c-'0')
	}
	return pid
}

// running reports whether pid is still alive (and not a zombie) after wait.
func running(pid int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil || strings.Contains(string(stat), ") Z ") || syscall.Kill(pid, 0) != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
