package pipeline

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist) && create:
		if err := s.checkDataDir(); err != nil {
			return nil, err
		}
		raw := make([]byte, 32)
		rand.Read(raw)
		b = []byte(hex.EncodeToString(raw))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, fmt.Errorf("write deployment secret: %w", err)
		}
	case err != nil && !create:
		return nil, fmt.Errorf("no deployment secret: set REGRESSD_SECRET to the roles' value, or point --data-dir at theirs (%v)", err)
	case err != nil:
		return nil, fmt.Errorf("read deployment secret: %w", err)
	}
	return schemas.NewSealer(b)
}
