package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors of the key store, matched with errors.Is.
var (
	// ErrUnknownKey: the presented key is malformed or not ours (HTTP 403).
	ErrUnknownKey = errors.New("unknown API key")
	// ErrRevokedKey: the key was ours and has been revoked (HTTP 403).
	ErrRevokedKey = errors.New("API key revoked")
	// ErrKeyExists: a live key already has this name.
	ErrKeyExists = errors.New("a live key with this name exists")
	// ErrKeyNotFound: no live key has this name.
	ErrKeyNotFound = errors.New("no live key with this name")
)

// Key format: "rgd_" + 16 hex characters of public lookup id + "_" + 43
// characters of base64url secret (256 bits). The lookup id finds the row; only
// the SHA-256 of the whole key is stored. A hash of a 256-bit random secret
// needs no salt or slow KDF: there is nothing to guess.
const (
	keyPrefix    = "rgd_"
	lookupIDLen  = 16 // hex characters (8 bytes)
	secretBytes  = 32
	secretLen    = 43 // base64url without padding of 32 bytes
	keyLen       = len(keyPrefix) + lookupIDLen + 1 + secretLen
	maxNameBytes = 64
)

var keyNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)

// Key is one gateway API key as stored: never its plaintext.
type Key struct {
	ID int64
	// Name identifies the key to people; unique among live keys.
	Name string
	// LookupID is the public part of the key ("rgd_<LookupID>_…"), shown so a
	// leaked key can be matched to its name.
	LookupID string
	Created  time.Time
	// Revoked is nil for a live key.
	Revoked *time.Time
	// LastUsed is nil until the key answers a request.
	LastUsed *time.Time
}

// KeyStore keeps gateway keys and their usage in PostgreSQL (migration
// 0100_gateway.sql). It is safe for concurrent use.
type KeyStore struct {
	db *pgxpool.Pool
}

// NewKeyStore returns a key store on db, whose schema must be migrated.
func NewKeyStore(db *pgxpool.Pool) *KeyStore { return &KeyStore{db: db} }

// ValidateKeyName reports why name cannot name a key, or nil.
func ValidateKeyName(name string) error {
	if len(name) == 0 || len(name) > maxNameBytes || !keyNameRE.MatchString(name) {
		return fmt.Errorf("key name %q: want 1 to %d characters of letters, digits, '.', '_', '@' or '-', starting with a letter or digit", name, maxNameBytes)
	}
	return nil
}

// Create makes a key named name and returns its plaintext, which is shown
// once and never stored, and its record.
func (s *KeyStore) Create(ctx context.Context, name string) (string, Key, error) {
	if err := ValidateKeyName(name); err != nil {
		return "", Key{}, err
	}
	id := make([]byte, lookupIDLen/2)
	secret := make([]byte, secretBytes)
	rand.Read(id) // crypto/rand.Read never fails on supported platforms
	rand.Read(secret)
	lookup := hex.EncodeToString(id)
	plain := keyPrefix + lookup + "_" + base64.RawURLEncoding.EncodeToString(secret)
	sum := sha256.Sum256([]byte(plain))
	k := Key{Name: name, LookupID: lookup}
	err := s.db.QueryRow(ctx, `INSERT INTO regressd_gateway_keys (name, lookup_id, key_hash)
		VALUES ($1, $2, $3) RETURNING id, created`, name, lookup, sum[:]).Scan(&k.ID, &k.Created)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return "", Key{}, fmt.Errorf("create key %q: %w", name, ErrKeyExists)
	}
	if err != nil {
		return "", Key{}, fmt.Errorf("create key %q: %w", name, err)
	}
	return plain, k, nil
}

// List returns every key, live and revoked, oldest first.
func (s *KeyStore) List(ctx context.Context) ([]Key, error) {
	rows, err := s.db.Query(ctx, `SELECT id, name, lookup_id, created, revoked, last_used
		FROM regressd_gateway_keys ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) {
		var k Key
		err := r.Scan(&k.ID, &k.Name, &k.LookupID, &k.Created, &k.Revoked, &k.LastUsed)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return keys, nil
}

// Revoke revokes the live key named name; its requests are refused with 403
// from then on. Its usage stays.
func (s *KeyStore) Revoke(ctx context.Context, name string) error {
	tag, err := s.db.Exec(ctx, `UPDATE regressd_gateway_keys SET revoked = now()
		WHERE name = $1 AND revoked IS NULL`, name)
	if err != nil {
		return fmt.Errorf("revoke key %q: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke key %q: %w", name, ErrKeyNotFound)
	}
	return nil
}

// Authenticate returns the key whose plaintext is presented: ErrUnknownKey
// when it is malformed or not ours, ErrRevokedKey when revoked. The stored
// hash is compared in constant time.
func (s *KeyStore) Authenticate(ctx context.Context, presented string) (Key, error) {
	lookup, ok := parseKey(presented)
	if !ok {
		return Key{}, ErrUnknownKey
	}
	var k Key
	var stored []byte
	err := s.db.QueryRow(ctx, `SELECT id, name, lookup_id, created, revoked, last_used, key_hash
		FROM regressd_gateway_keys WHERE lookup_id = $1`, lookup).
		Scan(&k.ID, &k.Name, &k.LookupID, &k.Created, &k.Revoked, &k.LastUsed, &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrUnknownKey
	}
	if err != nil {
		return Key{}, fmt.Errorf("authenticate: %w", err)
	}
	sum := sha256.Sum256([]byte(presented))
	if subtle.ConstantTimeCompare(sum[:], stored) != 1 {
		return Key{}, ErrUnknownKey
	}
	if k.Revoked != nil {
		return k, ErrRevokedKey
	}
	return k, nil
}

// parseKey checks the key's shape and returns its lookup id.
func parseKey(k string) (string, bool) {
	if len(k) != keyLen || !strings.HasPrefix(k, keyPrefix) {
		return "", false
	}
	lookup := k[len(keyPrefix) : len(keyPrefix)+lookupIDLen]
	if k[len(keyPrefix)+lookupIDLen] != '_' {
		return "", false
	}
	if _, err := hex.DecodeString(lookup); err != nil || strings.ToLower(lookup) != lookup {
		return "", false
	}
	return lookup, true
}

// Usage is what one request (or a sum of requests) consumed.
type Usage struct {
	// ContextRows is the number of X_train rows.
	ContextRows int `json:"context_rows"`
	// Features is the X_train width.
	Features int `json:"features"`
	// QueryRows is the number of X_test rows.
	QueryRows int `json:"query_rows"`
	// InputTokens counts the non-null values in X_train, y_train and X_test.
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens counts the predictions.
	OutputTokens int64 `json:"output_tokens"`
	// TotalTokens is InputTokens + OutputTokens.
	TotalTokens int64 `json:"total_tokens"`
}

// Record meters one authenticated request of key keyID on model: an answered
// prediction (ok) adds its usage; a refused or failed one counts as an
// error. It also stamps the key's last use.
func (s *KeyStore) Record(ctx context.Context, keyID int64, model string, u Usage, ok bool) error {
	var requests, errs int64 = 1, 0
	if !ok {
		requests, errs, u = 0, 1, Usage{}
	}
	batch := &pgx.Batch{}
	batch.Queue(`INSERT INTO regressd_gateway_usage AS u
		(key_id, day, model, requests, errors, context_rows, query_rows, input_tokens, output_tokens)
		VALUES ($1, (now() AT TIME ZONE 'UTC')::date, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (key_id, day, model) DO UPDATE SET
			requests = u.requests + EXCLUDED.requests,
			errors = u.errors + EXCLUDED.errors,
			context_rows = u.context_rows + EXCLUDED.context_rows,
			query_rows = u.query_rows + EXCLUDED.query_rows,
			input_tokens = u.input_tokens + EXCLUDED.input_tokens,
			output_tokens = u.output_tokens + EXCLUDED.output_tokens`,
		keyID, model, requests, errs, int64(u.ContextRows), int64(u.QueryRows), u.InputTokens, u.OutputTokens)
	batch.Queue(`UPDATE regressd_gateway_keys SET last_used = now() WHERE id = $1`, keyID)
	if err := s.db.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	return nil
}

// UsageRow is the metered usage of one key and model, summed over the
// query's period (and per UTC day when asked).
type UsageRow struct {
	Name     string
	LookupID string
	// Day is the UTC day for a per-day query, zero otherwise.
	Day          time.Time
	Model        string
	Requests     int64
	Errors       int64
	ContextRows  int64
	QueryRows    int64
	InputTokens  int64
	OutputTokens int64
}

// UsageQuery selects usage rows.
type UsageQuery struct {
	// Name limits the rows to keys with this name (live or revoked); "" is
	// every key.
	Name string
	// Since limits the rows to UTC days on or after it; zero is all time.
	Since time.Time
	// ByDay splits the rows per UTC day.
	ByDay bool
}

// Usage returns metered usage per key and model (and day), ordered by key
// name, day and model.
func (s *KeyStore) Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error) {
	day := `NULL::date`
	if q.ByDay {
		day = `u.day`
	}
	var since *time.Time
	if !q.Since.IsZero() {
		t := q.Since.UTC()
		since = &t
	}
	rows, err := s.db.Query(ctx, `SELECT k.name, k.lookup_id, `+day+` AS d, u.model,
			sum(u.requests)::bigint, sum(u.errors)::bigint, sum(u.context_rows)::bigint,
			sum(u.query_rows)::bigint, sum(u.input_tokens)::bigint, sum(u.output_tokens)::bigint
		FROM regressd_gateway_usage u JOIN regressd_gateway_keys k ON k.id = u.key_id
		WHERE ($1 = '' OR k.name = $1) AND ($2::timestamptz IS NULL OR u.day >= ($2::timestamptz AT TIME ZONE 'UTC')::date)
		GROUP BY k.id, k.name, k.lookup_id, d, u.model
		ORDER BY k.name, k.id, d, u.model`, q.Name, since)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (UsageRow, error) {
		var u UsageRow
		var d *time.Time
		err := r.Scan(&u.Name, &u.LookupID, &d, &u.Model, &u.Requests, &u.Errors,
			&u.ContextRows, &u.QueryRows, &u.InputTokens, &u.OutputTokens)
		if d != nil {
			u.Day = *d
		}
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return out, nil
}
