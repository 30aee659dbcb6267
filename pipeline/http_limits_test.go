package pipeline

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// serveForTest serves h with lim on a loopback port until the test ends.
func serveForTest(t *testing.T, h http.Handler, lim serverLimits) (string, *connLimiter) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, cl := newServer(ln, h, lim)
	go srv.Serve(cl)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), cl
}

func livez() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write(b)
	})
	return mux
}

// The audit's slowloris: thousands of connections that never finish their
// headers exhausted the process's file descriptors and /livez stopped
// answering. With the descriptors limited to fewer than the stalled
// connections need on both ends, the cap keeps the server's share bounded,
// new connections evict the stalled ones, and /livez answers throughout.
func TestStalledConnectionsDoNotLockOutLivez(t *testing.T) {
	const stalled, limit = 2500, 4096
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Cur < limit {
		t.Skipf("open file limit %d: the test needs %d", old.Cur, limit)
	}
	lowered := old
	lowered.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)

	addr, cl := serveForTest(t, livez(), serverLimits{MaxConns: 1000})
	conns := make([]net.Conn, 0, stalled)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range stalled {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial after %d stalled connections: %v", len(conns), err)
		}
		io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n") // and never the blank line
		conns = append(conns, c)
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 5 {
		res, err := client.Get("http://" + addr + "/livez")
		if err != nil {
			t.Fatalf("/livez with %d stalled connections (try %d): %v", stalled, i, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("/livez: %s", res.Status)
		}
	}
	if n := cl.open(); n > 1000 {
		t.Fatalf("%d connections held, over the cap of 1000", n)
	}
	if cl.evicted.Load() == 0 {
		t.Fatal("no stalled connection was evicted")
	}
}

// A body claiming a gigabyte and sending a few bytes is refused with 413 at
// once, before any of it is read; the audit's got no answer in 45 s.
func TestClaimedHugeBodyRefusedBeforeReading(t *testing.T) {
	addr, _ := serveForTest(t, livez(), serverLimits{MaxBody: 1 << 20})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{\"a\": 1}\r\n")
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a claimed 1 GiB body: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "limit") {
		t.Fatalf("%s %s, want 413 with a message", res.Status, body)
	}
}

// A body that stops arriving ends at the read timeout, and an idle
// keep-alive connection is closed after the idle timeout (the audit's
// stayed open past 90 s).
func TestReadAndIdleTimeouts(t *testing.T) {
	addr, _ := serveForTest(t, livez(), serverLimits{ReadTimeout: 500 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"a\": 1}")
	slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	began := time.Now()
	io.ReadAll(slow) // an error answer or none; then the close
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("a stalled body held its connection %v", took)
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br := bufio.NewReader(idle)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(res.Body)
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	began = time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: %v, want it closed (EOF)", err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("idle connection closed after %v", took)
	}
}

// The audit's DNS rebinding: with Host: evil.example, listing, deleting
// and dry runs all answered 200 on the loopback API. A loopback server
// answers loopback names only, and refuses a foreign Origin.
func TestLoopbackServerRefusesForeignHostAndOrigin(t *testing.T) {
	var reached atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { reached.Add(1); fmt.Fprintln(w, "ok") })
	addr, _ := serveForTest(t, mux, serverLimits{LoopbackNames: true})
	_, port, _ := net.SplitHostPort(addr)
	const base = "/api/v3/configure/processing_engine_trigger"
	cases := []struct {
		method, path, host, origin string
		want                       int
	}{
		{"GET", base, "evil.example", "", 403},
		{"DELETE", base + "?trigger_name=t", "evil.example:" + port, "", 403},
		{"POST", "/api/v3/engine/t", "evil.example", "", 403},
		{"POST", base, "127.0.0.1:" + port, "http://evil.example", 403},
		{"POST", base, "127.0.0.1:" + port, "null", 403},
		{"GET", base, "127.0.0.1.evil.example", "", 403},
		{"GET", base, "127.0.0.1:" + port, "", 200},
		{"GET", base, "localhost:" + port, "http://localhost:" + port, 200},
		{"POST", base, "[::1]:" + port, "http://127.0.0.1:" + port, 200},
		{"GET", "/ui/", "regressd.localhost:" + port, "", 200},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, "http://"+addr+tc.path, strings.NewReader("{}"))
		req.Host = tc.host
		req.Header.Set("Content-Type", "application/json")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s %s Host %q Origin %q: HTTP %d %s, want %d", tc.method, tc.path, tc.host, tc.origin, res.StatusCode, body, tc.want)
		}
		if tc.want == 403 && !strings.Contains(string(body), "loopback") {
			t.Errorf("403 without a message: %s", body)
		}
	}
	if n := reached.Load(); n != 4 {
		t.Errorf("the handler was reached %d times, want 4 (the loopback names only)", n)
	}
}
