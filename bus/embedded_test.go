package bus

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// One store, one server: a second embedded server on a store in use is
// refused (two would each take it for theirs and stall each other), and
// the store is free again once the first shuts down.
func TestEmbeddedStoreIsExclusive(t *testing.T) {
	dir := t.TempDir()
	if _, err := StartEmbedded(EmbeddedConfig{StoreDir: dir, Listen: "no port"}); err == nil {
		t.Fatal("a bad listen address was accepted")
	}
	first, err := StartEmbedded(EmbeddedConfig{StoreDir: dir}) // the failed start left no lock
	if err != nil {
		t.Fatal(err)
	}
	if second, err := StartEmbedded(EmbeddedConfig{StoreDir: dir}); !errors.Is(err, ErrStoreInUse) {
		if second != nil {
			second.Shutdown()
		}
		t.Fatalf("second server on a store in use: %v, want ErrStoreInUse", err)
	}
	first.Shutdown()
	again, err := StartEmbedded(EmbeddedConfig{StoreDir: dir})
	if err != nil {
		t.Fatalf("after the first shut down: %v", err)
	}
	again.Shutdown()
}

// While one process holds the store, another reaches its bus through the
// URL it left (token included, this user only), and the URL goes with it.
func TestEmbeddedClientFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "client.url")
	e, err := StartEmbedded(EmbeddedConfig{StoreDir: dir, ClientFile: file})
	if err != nil {
		t.Fatal(err)
	}
	in, err := e.Connect("in-process")
	if err != nil {
		t.Fatalf("in-process client: %v", err)
	}
	in.Close()
	url, err := ReadClientURL(file, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("client file %v %v, want mode 600", fi, err)
	}
	nc, err := Connect(url, "other process")
	if err != nil {
		t.Fatalf("connect with the client URL: %v", err)
	}
	nc.Close()
	bare := strings.Replace(url, url[len("nats://"):strings.Index(url, "@")+1], "", 1)
	if nc, err := Connect(bare, "no token"); err == nil {
		nc.Close()
		t.Fatalf("connected to %s without the token", bare)
	} else if strings.Contains(err.Error(), url[len("nats://"):strings.Index(url, "@")]) {
		t.Fatalf("the error shows the token: %v", err)
	}
	if _, err := Connect(strings.Replace(url, "@", "x@", 1), "wrong token"); err == nil || strings.Contains(err.Error(), url[len("nats://"):strings.Index(url, "@")]) {
		t.Fatalf("a wrong token: %v", err)
	}
	e.Shutdown()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("client file left after shutdown: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"nats://tok@127.0.0.1:4222":           "nats://REDACTED@127.0.0.1:4222",
		"nats://u:p%zz@h:1, nats://u:a/b@h:1": "nats://REDACTED@h:1,nats://REDACTED@h:1",
		"tok@127.0.0.1:4222":                  "REDACTED@127.0.0.1:4222",
		"nats://u:p#x@h:1":                    "nats://REDACTED@h:1",
		"nats://127.0.0.1:4222":               "nats://127.0.0.1:4222",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// A listener other hosts can reach is refused without a token; with one, a
// bare client (the audit's "CONNECT {}") is refused and a client with the
// token, or the server's own Connect, gets in.
func TestEmbeddedNonLoopbackListenRequiresToken(t *testing.T) {
	dir := t.TempDir()
	if e, err := StartEmbedded(EmbeddedConfig{StoreDir: dir, Listen: "0.0.0.0:0"}); !errors.Is(err, ErrListenNeedsToken) {
		if e != nil {
			e.Shutdown()
		}
		t.Fatalf("non-loopback listen without a token: %v, want ErrListenNeedsToken", err)
	}
	e, err := StartEmbedded(EmbeddedConfig{StoreDir: dir, Listen: "0.0.0.0:0", Token: "t0ken-for-the-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	url := e.ClientURL()
	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without the token was let in")
	}
	if nc, err := nats.Connect(url, nats.Token("wrong"), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client with a wrong token was let in")
	}
	nc, err := nats.Connect(url, nats.Token("t0ken-for-the-test"))
	if err != nil {
		t.Fatalf("client with the token: %v", err)
	}
	nc.Close()
	own, err := e.Connect("own")
	if err != nil {
		t.Fatalf("the server's own client: %v", err)
	}
	own.Close()
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "": false, "0.0.0.0": false, "10.1.2.3": false} {
		if IsLoopback(host) != want {
			t.Errorf("IsLoopback(%q) = %v", host, !want)
		}
	}
}
