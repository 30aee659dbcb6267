package gpu

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// fakeDevice is a second Device, for tests: it keeps its bytes in a CPU
// device's arena but counts every reservation and release by what it is
// for, and refuses the reservations its refuse function names. It proves
// that the engine reaches device memory only through the Device interface.
type fakeDevice struct {
	*CPUDevice
	refuse func(what string) bool

	mu       sync.Mutex
	reserves int
	releases int
	whats    map[string]int
}

var _ Device = (*fakeDevice)(nil)

func newFakeDevice(refuse func(what string) bool) *fakeDevice {
	return &fakeDevice{CPUDevice: NewCPUDevice(1 << 30), refuse: refuse, whats: map[string]int{}}
}

func (d *fakeDevice) Name() string { return "fake" }

func (d *fakeDevice) Reserve(bytes int64, what string) (Reservation, error) {
	if d.refuse != nil && d.refuse(what) {
		return nil, fmt.Errorf("%w: fake device refuses %s", ErrOutOfMemory, what)
	}
	res, err := d.CPUDevice.Reserve(bytes, what)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reserves++
	d.whats[what]++
	return &countedReservation{Reservation: res, d: d}, nil
}

// countedReservation counts its first Release on its device.
type countedReservation struct {
	Reservation
	d    *fakeDevice
	once sync.Once
}

func (r *countedReservation) Release() {
	r.Reservation.Release()
	r.once.Do(func() {
		r.d.mu.Lock()
		r.d.releases++
		r.d.mu.Unlock()
	})
}

// TestFakeDeviceSeam runs the engine on a device that is not the CPU
// device: every buffer goes through Reserve and comes back through Release,
// the predictions are the CPU device's to the bit, and refusals drive the
// ladder as out-of-memory errors do.
func TestFakeDeviceSeam(t *testing.T) {
	X, y := synth(300, 4, 21)
	Xq, _ := synth(100, 4, 22)
	ref := mustPredict(t, mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(32)), Xq)

	t.Run("counts", func(t *testing.T) {
		dev := newFakeDevice(nil)
		r := mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(32), WithDevice(dev))
		sameBits(t, "fake device", ref, mustPredict(t, r, Xq))
		if rep := r.MemoryReport(); rep.Rung != RungResidentBF16 {
			t.Errorf("rung = %s, want %s", rep.Rung, RungResidentBF16)
		}
		if dev.whats["resident bf16 cache"] != 1 || dev.whats["query batch scores"] != 4 {
			t.Errorf("reservations %v: want one resident cache and four query batches", dev.whats)
		}
		if got, want := dev.Used(), r.estBytes(CacheDTypeBF16); got != want {
			t.Errorf("device holds %d bytes after predict, want the resident cache (%d)", got, want)
		}
		r.Close()
		if dev.Used() != 0 || dev.reserves != dev.releases {
			t.Errorf("after Close: %d bytes held, %d reservations, %d releases", dev.Used(), dev.reserves, dev.releases)
		}
	})

	t.Run("refused resident cache offloads", func(t *testing.T) {
		dev := newFakeDevice(func(what string) bool { return strings.HasPrefix(what, "resident") })
		r := mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(32), WithDevice(dev), WithHostMemory(1<<30))
		sameBits(t, "offloaded on the fake device", ref, mustPredict(t, r, Xq))
		if rep := r.MemoryReport(); rep.Rung != RungOffloadBF16 {
			t.Errorf("rung = %s, want %s", rep.Rung, RungOffloadBF16)
		}
		r.Close()
		if dev.Used() != 0 {
			t.Errorf("after Close: %d bytes held", dev.Used())
		}
	})

	t.Run("refusing everything is out of memory", func(t *testing.T) {
		dev := newFakeDevice(func(string) bool { return true })
		r := mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(32), WithDevice(dev))
		if _, err := r.Predict(t.Context(), Xq); !errors.Is(err, ErrOutOfMemory) {
			t.Fatalf("predict on a device that refuses everything: err = %v, want ErrOutOfMemory", err)
		}
	})
}
