package pipeline

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
)

// secretFile is where a deployment secret generated for a data dir lives.
const secretFile = "secret"

// Sealer seals model-service keys for the bus with the deployment secret:
// secret when given, else the one generated once under the data dir (and
// generated now when create is true). Every role of a deployment must
// share it.
func (s Stores) Sealer(secret []byte, create bool) (*schemas.Sealer, error) {
	if len(secret) > 0 {
		return schemas.NewSealer(secret)
	}
	if s.DataDir == "" {
		s.DataDir = "./regressd-data"
	}
	p := filepath.Join(s.DataDir, secretFile)
	b, err := readSecretFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist) && create:
		if err := s.checkDataDir(); err != nil {
			return nil, err
		}
		if b, err = createSecretFile(p); err != nil {
			return nil, fmt.Errorf("write deployment secret: %w", err)
		}
	case err != nil && !create:
		return nil, fmt.Errorf("no deployment secret: set REGRESSD_SECRET to the roles' value, or point --data-dir at theirs (%v)", err)
	case err != nil:
		return nil, fmt.Errorf("read deployment secret: %w", err)
	}
	return schemas.NewSealer(b)
}

// natsTokenFile is where the token of a non-loopback embedded NATS
// listener lives, generated once under the data dir.
const natsTokenFile = "nats-token"

// natsToken is the token the embedded NATS server requires of its network
// clients when it listens on other than a loopback address: read from the
// data dir, or generated there once. "" for no listener or a loopback one.
func (s Stores) natsToken() (string, error) {
	if s.NATSListen == "" {
		return "", nil
	}
	host, _, err := net.SplitHostPort(s.NATSListen)
	if err != nil || bus.IsLoopback(host) {
		return "", nil // StartEmbedded reports a bad address
	}
	p := filepath.Join(s.DataDir, natsTokenFile)
	b, err := readSecretFile(p)
	if errors.Is(err, os.ErrNotExist) {
		b, err = createSecretFile(p)
	}
	if err != nil {
		return "", fmt.Errorf("nats token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// readSecretFile reads a secret file, never through a symlink.
func readSecretFile(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symlink: refused (remove it)", p)
		}
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}

// createSecretFile writes 32 random bytes, hex-encoded, to a new file
// readable by this user only: never through a symlink (O_NOFOLLOW) and
// never over an existing file (O_EXCL), so a link planted in a shared
// directory cannot redirect it. Another process that won the race to
// create it wins: its secret is read back.
func createSecretFile(p string) ([]byte, error) {
	raw := make([]byte, 32)
	rand.Read(raw)
	b := []byte(hex.EncodeToString(raw))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, os.ErrExist) {
		return readSecretFile(p)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	return b, f.Close()
}
