package schemas

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ErrSealExpired means a sealed key is past its expiry.
var ErrSealExpired = errors.New("sealed key expired")

// Sealer seals the model-service key for its trip over the bus, so it is
// never stored in plain text in a stream: AES-256-GCM under a key derived
// from the deployment secret, with an expiry inside the sealed bytes.
type Sealer struct {
	aead  cipher.AEAD
	idKey [32]byte // keys KeyID's HMAC
}

// NewSealer derives the sealing key from the deployment secret. Every role of
// one deployment must share the secret.
func NewSealer(secret []byte) (*Sealer, error) {
	if len(secret) < 16 {
		return nil, fmt.Errorf("deployment secret must be at least 16 bytes")
	}
	k := sha256.Sum256(append([]byte("regressd seal v1\x00"), secret...))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead, idKey: sha256.Sum256(append([]byte("regressd key id v1\x00"), secret...))}, nil
}

// sealAD is the associated data binding a sealed key to its task: a seal
// taken from one task's job does not open in another's.
func sealAD(taskID string) []byte { return []byte("regressd task\x00" + taskID) }

// KeyID names a model-service key without revealing it: an HMAC under the
// deployment secret (a plain hash of a short key could be guessed back).
// Two runs of one window under different keys are two runs: the id joins
// a job's deduplication key. "" for no key.
func (s *Sealer) KeyID(key string) string {
	if key == "" {
		return ""
	}
	m := hmac.New(sha256.New, s.idKey[:])
	m.Write([]byte(key))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// Seal encrypts key for the task taskID, so that Open accepts it for that
// task only, until now+ttl.
func (s *Sealer) Seal(key, taskID string, ttl time.Duration) (string, error) {
	if key == "" {
		return "", nil
	}
	plain := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(plain, uint64(time.Now().Add(ttl).Unix()))
	plain = append(plain, key...)
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := s.aead.Seal(nonce, nonce, plain, sealAD(taskID))
	return base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts a key sealed for the task taskID; "" opens to "".
func (s *Sealer) Open(sealed, taskID string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	b, err := base64.RawStdEncoding.DecodeString(sealed)
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", errors.New("sealed key is malformed")
	}
	ns := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, b[:ns], b[ns:], sealAD(taskID))
	if err != nil || len(plain) < 8 {
		return "", errors.New("sealed key does not open with this deployment secret for this task")
	}
	if exp := int64(binary.BigEndian.Uint64(plain)); time.Now().Unix() > exp {
		return "", ErrSealExpired
	}
	return string(plain[8:]), nil
}
