package gateway

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/tsdb/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestKeyStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	ks := NewKeyStore(pgtest.New(t))

	plain, k, err := ks.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(plain, "rgd_"+k.LookupID+"_") || len(plain) != keyLen {
		t.Fatalf("key %q does not have the rgd_<lookup>_<secret> shape (lookup %s)", plain, k.LookupID)
	}
	if _, _, err := ks.Create(ctx, "alice"); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("duplicate name: err=%v, want ErrKeyExists", err)
	}
	for _, bad := range []string{"", "has space", "-dash", strings.Repeat("a", 65), "semi;colon"} {
		if _, _, err := ks.Create(ctx, bad); err == nil {
			t.Errorf("Create(%q) accepted a bad name", bad)
		}
	}

	got, err := ks.Authenticate(ctx, plain)
	if err != nil || got.ID != k.ID || got.Name != "alice" {
		t.Fatalf("Authenticate(good)=%+v, %v", got, err)
	}
	// A key with the right lookup id but a different secret is unknown.
	tampered := plain[:len(plain)-1] + string("AB"[strings.IndexByte("AB", plain[len(plain)-1])+1&1])
	if tampered == plain {
		tampered = plain[:len(plain)-1] + "C"
	}
	for _, bad := range []string{tampered, "rgd_0000000000000000_" + strings.Repeat("x", secretLen), "nonsense", "", plain + "x"} {
		if _, err := ks.Authenticate(ctx, bad); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("Authenticate(%.12q…)=%v, want ErrUnknownKey", bad, err)
		}
	}

	// The plaintext is never stored.
	var n int
	if err := ks.db.QueryRow(ctx, `SELECT count(*) FROM regressd_gateway_keys WHERE position($1 in encode(key_hash, 'escape')) > 0 OR name = $1`, plain).Scan(&n); err != nil || n != 0 {
		t.Fatalf("plaintext found in the table (n=%d, err=%v)", n, err)
	}

	if err := ks.Revoke(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Authenticate(ctx, plain); !errors.Is(err, ErrRevokedKey) {
		t.Fatalf("revoked key: err=%v, want ErrRevokedKey", err)
	}
	if err := ks.Revoke(ctx, "alice"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("revoke twice: err=%v, want ErrKeyNotFound", err)
	}
	// The name is free again once revoked.
	plain2, k2, err := ks.Create(ctx, "alice")
	if err != nil || plain2 == plain || k2.ID == k.ID {
		t.Fatalf("re-create after revoke: %v (same key: %v)", err, plain2 == plain)
	}
	keys, err := ks.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].Revoked == nil || keys[1].Revoked != nil {
		t.Fatalf("List=%+v, want the revoked alice then the live one", keys)
	}
}

func TestKeyStoreUsage(t *testing.T) {
	ctx := context.Background()
	ks := NewKeyStore(pgtest.New(t))
	_, a, _ := ks.Create(ctx, "a")
	_, b, _ := ks.Create(ctx, "b")
	u := Usage{ContextRows: 10, Features: 3, QueryRows: 4, InputTokens: 74, OutputTokens: 4, TotalTokens: 78}
	for range 3 {
		if err := ks.Record(ctx, a.ID, "m1", u, true); err != nil {
			t.Fatal(err)
		}
	}
	ks.Record(ctx, a.ID, "", Usage{}, false)
	ks.Record(ctx, b.ID, "m1", u, true)
	ks.Record(ctx, a.ID, "m2", u, true)

	rows, err := ks.Usage(ctx, UsageQuery{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("usage rows for a: %+v, want 3 (errors, m1, m2)", rows)
	}
	m1 := rows[1]
	if m1.Model != "m1" || m1.Requests != 3 || m1.ContextRows != 30 || m1.QueryRows != 12 || m1.InputTokens != 222 || m1.OutputTokens != 12 || m1.Errors != 0 {
		t.Fatalf("a/m1 usage %+v", m1)
	}
	if rows[0].Model != "" || rows[0].Errors != 1 || rows[0].Requests != 0 {
		t.Fatalf("a errors row %+v", rows[0])
	}
	all, _ := ks.Usage(ctx, UsageQuery{ByDay: true})
	if len(all) != 4 || all[0].Day.IsZero() {
		t.Fatalf("by day: %+v", all)
	}
	future, _ := ks.Usage(ctx, UsageQuery{Since: time.Now().Add(48 * time.Hour)})
	if len(future) != 0 {
		t.Fatalf("since the day after tomorrow: %+v, want none", future)
	}
	keys, _ := ks.List(ctx)
	if keys[0].LastUsed == nil {
		t.Fatal("last_used not stamped")
	}
}
