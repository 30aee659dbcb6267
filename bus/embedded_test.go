package bus

import (
	"errors"
	"testing"
)

// One store, one server: a second embedded server on a store in use is
// refused (two would each take it for theirs and stall each other), and
// the store is free again once the first shuts down.
func TestEmbeddedStoreIsExclusive(t *testing.T) {
	dir := t.TempDir()
	first, err := StartEmbedded(EmbeddedConfig{StoreDir: dir})
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
