package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// The deployment secret and the NATS token are never written through a
// symlink planted where they go (the audit's passfile finding, run as root).
func TestSecretFilesRefuseSymlinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, secretFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := (Stores{DataDir: dir}).Sealer(nil, true); err == nil {
		t.Fatal("a secret file planted as a symlink was accepted")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Fatalf("the symlink's target was written: %q", b)
	}
	if err := os.Symlink(victim, filepath.Join(dir, natsTokenFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := (Stores{DataDir: dir, NATSListen: "0.0.0.0:0"}).natsToken(); err == nil {
		t.Fatal("a nats token file planted as a symlink was accepted")
	}
}

// An embedded bus listening on every interface requires the token
// generated under the data dir: a bare client is refused, a client with the
// token gets in, and the token stays the same across restarts.
func TestEmbeddedBusOnNetworkRequiresToken(t *testing.T) {
	dir := t.TempDir()
	s := Stores{DataDir: dir, NATSListen: "0.0.0.0:0"}
	st, err := Open(context.Background(), s, "test", true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := os.ReadFile(filepath.Join(dir, natsTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, natsTokenFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 600", fi.Mode().Perm())
	}
	token := strings.TrimSpace(string(b))
	url := st.Embedded.ClientURL()
	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without the token reached the bus")
	}
	nc, err := nats.Connect(url, nats.Token(token))
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	nc.Close()
	if again, err := s.natsToken(); err != nil || again != token {
		t.Fatalf("token read back %q, %v; want the generated one", again, err)
	}
}
