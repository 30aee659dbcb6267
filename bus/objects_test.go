package bus_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

// TestForgetLeavesNothing: Delete would leave a marker per object until the
// bucket's TTL; Forget leaves the stream as it was before the Put, for small
// and multi-chunk objects, and forgetting twice is fine.
func TestForgetLeavesNothing(t *testing.T) {
	s := bustest.New(t)
	ctx := context.Background()
	o, err := bus.OpenObjects(ctx, s.JS, schemas.StoreContext)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.JS.Stream(ctx, "OBJ_"+schemas.StoreContext)
	if err != nil {
		t.Fatal(err)
	}
	state := func() (msgs, subjects uint64) {
		t.Helper()
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs, info.State.NumSubjects
	}
	keep := jetstream.ObjectMeta{Name: "kept"}
	if _, err := o.Put(ctx, keep, bytes.NewReader([]byte("stays"))); err != nil {
		t.Fatal(err)
	}
	msgs0, subj0 := state()
	for _, size := range []int{10, 300 << 10} { // one chunk; three chunks of 128 KiB
		if _, err := o.Put(ctx, jetstream.ObjectMeta{Name: "plan/t_1"}, bytes.NewReader(make([]byte, size))); err != nil {
			t.Fatal(err)
		}
		if msgs, _ := state(); msgs <= msgs0 {
			t.Fatalf("put stored nothing: %d messages", msgs)
		}
		for range 2 {
			if err := o.Forget(ctx, "plan/t_1"); err != nil {
				t.Fatal(err)
			}
		}
		if msgs, subj := state(); msgs != msgs0 || subj != subj0 {
			t.Fatalf("after Forget: %d messages on %d subjects, want %d on %d", msgs, subj, msgs0, subj0)
		}
		if _, err := o.GetInfo(ctx, "plan/t_1", jetstream.GetObjectInfoShowDeleted()); !bus.IsNotFound(err) {
			t.Fatalf("forgotten object still known: %v", err)
		}
	}
	if b, err := o.GetBytes(ctx, "kept"); err != nil || string(b) != "stays" {
		t.Fatalf("other object: %q, %v", b, err)
	}
}

// TestGetChunk reads a one-chunk object by its NUID as Get would, and
// reports a forgotten one as not found.
func TestGetChunk(t *testing.T) {
	s := bustest.New(t)
	ctx := context.Background()
	o, err := bus.OpenObjects(ctx, s.JS, schemas.StoreContext)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("context "), 4096)
	info, err := o.Put(ctx, jetstream.ObjectMeta{Name: "context/t_1"}, bytes.NewReader(body))
	if err != nil || info.Chunks != 1 {
		t.Fatalf("put: %+v, %v", info, err)
	}
	got, err := o.GetChunk(ctx, info.NUID)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("GetChunk: %d bytes, %v; want the %d put", len(got), err, len(body))
	}
	if err := o.ForgetInfo(ctx, info); err != nil {
		t.Fatal(err)
	}
	if _, err := o.GetChunk(ctx, info.NUID); !bus.IsNotFound(err) {
		t.Fatalf("forgotten object: %v, want not found", err)
	}
}
