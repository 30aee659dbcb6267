package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/regressd/regressd/schemas"
)

// keySealer seals SERVICE_API_KEY for the workers; without a key, jobs carry
// none (the built-in engine needs none; a hosted gateway will refuse them).
func (c *replayCommand) keySealer(st *stack) (func() (string, error), error) {
	key := os.Getenv("SERVICE_API_KEY")
	if key == "" {
		st.log.Warn("SERVICE_API_KEY is not set: replayed jobs carry no model-service key (fine for the built-in engine; a hosted gateway will refuse them)")
		return func() (string, error) { return "", nil }, nil
	}
	secret := []byte(os.Getenv("REGRESSD_SECRET"))
	if len(secret) == 0 {
		b, err := os.ReadFile(filepath.Join(c.common.dataDir, "secret"))
		if err != nil {
			return nil, fmt.Errorf("no deployment secret to seal SERVICE_API_KEY with: set REGRESSD_SECRET to the roles' value, or point --data-dir at theirs (%v)", err)
		}
		secret = b
	}
	sealer, err := schemas.NewSealer(secret)
	if err != nil {
		return nil, err
	}
	return func() (string, error) { return sealer.Seal(key, time.Hour) }, nil
}
