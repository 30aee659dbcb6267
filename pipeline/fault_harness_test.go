package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/tsdb/pgtest"
)

// The fault tests run regressd's roles as processes of this test binary,
// each starting its role with pipeline.Start, and NATS servers as processes
// of this test binary too, so that each can be killed with SIGKILL at any
// instant.

func TestMain(m *testing.M) {
	runNATSHelper() // when asked to, this process is a NATS server for the fault tests, and exits
	runRoleHelper() // or a role
	os.Exit(pgtest.Main(m))
}

// envRoleHelper, when set to a JSON array (a role, then its flags as the
// command line takes them), turns this test binary into that role's
// process: a process the tests can kill -9 or stop with SIGTERM.
const envRoleHelper = "REGRESSD_TEST_ROLE"

// runRoleHelper runs the role envRoleHelper names until SIGTERM, then
// stops it gracefully and exits; it returns when not asked to.
func runRoleHelper() {
	spec := os.Getenv(envRoleHelper)
	if spec == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(spec), &args); err != nil || len(args) == 0 {
		fmt.Fprintln(os.Stderr, "role helper: want a JSON array of a role and its flags:", err)
		os.Exit(2)
	}
	cfg, err := pipelinetest.Config(args[1:], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "role helper:", err)
		os.Exit(2)
	}
	cfg.Roles = []pipeline.Role{pipeline.Role(args[0])}
	if args[0] == "run" {
		cfg.Roles = pipeline.AllRoles
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p, err := pipeline.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "regressd:", err)
		os.Exit(1)
	}
	<-ctx.Done()
	p.Close()
	os.Exit(0)
}

// envNATSHelper, when set to a config file, turns this test binary into a
// NATS server (see TestMain): a process the tests can kill -9.
const envNATSHelper = "REGRESSD_TEST_NATS_CONFIG"

// runNATSHelper serves NATS from the config named by envNATSHelper until the
// process is killed or told to stop; it returns false when not asked to.
func runNATSHelper() bool {
	conf := os.Getenv(envNATSHelper)
	if conf == "" {
		return false
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats helper:", err)
		os.Exit(2)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats helper:", err)
		os.Exit(2)
	}
	s.ConfigureLogger()
	go s.Start()
	if !s.ReadyForConnections(60 * time.Second) {
		fmt.Fprintln(os.Stderr, "nats helper: not ready")
		os.Exit(3)
	}
	s.WaitForShutdown()
	os.Exit(0)
	return true
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// natsNode is one NATS server process run from a config in ops/nats/.
type natsNode struct {
	t      *testing.T
	name   string
	conf   string
	env    []string
	port   int
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startNATS starts n nodes from ops/nats/single.conf (n = 1) or
// ops/nats/cluster.conf (n > 1), each with its own store under t's temp dir.
func startNATS(t *testing.T, n int) []*natsNode {
	t.Helper()
	conf, _ := filepath.Abs("../ops/nats/single.conf")
	if n > 1 {
		conf, _ = filepath.Abs("../ops/nats/cluster.conf")
	}
	dir := t.TempDir()
	nodes := make([]*natsNode, n)
	var routes []string
	cports := make([]int, n)
	for i := range nodes {
		cports[i] = freePort(t)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", cports[i]))
	}
	for i := range nodes {
		name := fmt.Sprintf("n%d", i+1)
		nd := &natsNode{t: t, name: name, conf: conf, port: freePort(t), log: filepath.Join(dir, name+".log")}
		nd.env = []string{envNATSHelper + "=" + conf, "NATS_SERVER_NAME=" + name,
			fmt.Sprintf("NATS_LISTEN=127.0.0.1:%d", nd.port), "NATS_STORE_DIR=" + filepath.Join(dir, name),
			fmt.Sprintf("NATS_CLUSTER_LISTEN=127.0.0.1:%d", cports[i]), "NATS_ROUTES=[" + strings.Join(routes, ", ") + "]"}
		nodes[i] = nd
		nd.start()
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.kill()
		}
		if t.Failed() {
			for _, nd := range nodes {
				t.Logf("--- %s log (tail) ---\n%s", nd.name, tail(nd.log, 20))
			}
		}
	})
	for _, nd := range nodes {
		waitPort(t, nd.port, 30*time.Second)
	}
	return nodes
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func (n *natsNode) start() {
	n.t.Helper()
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), n.env...)
	cmd.SysProcAttr = childAttrs()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(n.exited) }()
}

// kill stops the node with SIGKILL: no flush, no goodbye.
func (n *natsNode) kill() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	n.cmd = nil
}

func (n *natsNode) restart() {
	n.t.Helper()
	n.kill()
	n.start()
	waitPort(n.t, n.port, 30*time.Second)
}

func waitPort(t *testing.T, port int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on port %d after %v", port, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// roleProc is one regressd role run as a process of this test binary.
type roleProc struct {
	t      *testing.T
	name   string
	args   []string
	env    []string
	log    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	kills  int
	terms  int
	// slowestTerm is the longest a SIGTERM took to end the process.
	slowestTerm time.Duration
}

func (p *roleProc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== start %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	spec, _ := json.Marshal(p.args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Env = append(cmd.Env, envRoleHelper+"="+string(spec))
	cmd.SysProcAttr = childAttrs()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	exited := p.exited
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
}

// kill ends the process with SIGKILL, wherever it is in its work.
func (p *roleProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.cmd = nil
	p.kills++
}

// term asks the process to stop (SIGTERM) and returns how long it took.
func (p *roleProc) term() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
	took := time.Since(start)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.t.Errorf("%s exited with status %d on SIGTERM, want 0 (a graceful stop)", p.name, code)
	}
	p.cmd = nil
	p.terms++
	p.slowestTerm = max(p.slowestTerm, took)
	return took
}

// alive reports whether the process is still running (it may have exited
// on its own, e.g. when it could not reach NATS at start).
func (p *roleProc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tcpProxy forwards a fixed loopback port to a target that may move: the
// database keeps one URL across restarts on new ports.
type tcpProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
}

func newProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *tcpProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *tcpProxy) setTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

func (p *tcpProxy) serve(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	s, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	go func() { io.Copy(s, c); s.Close() }()
	io.Copy(c, s)
	c.Close()
}

// countLines counts the lines of a log file holding every fragment.
func countLines(path string, fragments ...string) int {
	b, _ := os.ReadFile(path)
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		ok := true
		for _, f := range fragments {
			if !bytes.Contains(line, []byte(f)) {
				ok = false
				break
			}
		}
		if ok && len(line) > 0 {
			n++
		}
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }
