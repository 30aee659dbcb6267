package gpu

import (
	"errors"
	"fmt"
	"sync"
)

// ErrOutOfMemory is returned when an allocation does not fit the device's
// memory; the memory ladder reacts to it (smaller query batch, row-chunked
// build, no cache).
var ErrOutOfMemory = errors.New("device out of memory")

// Device is where the engine computes and keeps a resident cache. The CPU
// device computes on the host's cores and models device memory as an arena of
// fixed capacity: every device buffer is reserved against it, and a
// reservation past it fails with ErrOutOfMemory, so the memory ladder runs for
// real. (The bytes themselves live in the Go heap.) A Device is safe for
// concurrent use.
type Device struct {
	name     string
	capacity int64

	mu   sync.Mutex
	used int64
	peak int64
}

// NewCPUDevice returns a CPU device whose arena holds capacity bytes;
// capacity ≤ 0 assumes DefaultDeviceMemoryBytes (24 GiB), as the vendor does
// for an unknown card.
func NewCPUDevice(capacity int64) *Device {
	if capacity <= 0 {
		capacity = DefaultDeviceMemoryBytes
	}
	return &Device{name: "cpu", capacity: capacity}
}

// Name says what the device is.
func (d *Device) Name() string { return d.name }

// Capacity is the arena size in bytes.
func (d *Device) Capacity() int64 { return d.capacity }

// Used is the number of bytes reserved now.
func (d *Device) Used() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// Peak is the most bytes ever reserved at once; ResetPeak starts it again.
func (d *Device) Peak() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peak
}

// ResetPeak sets the peak to the current use.
func (d *Device) ResetPeak() {
	d.mu.Lock()
	d.peak = d.used
	d.mu.Unlock()
}

// reservation is bytes held on a device until release.
type reservation struct {
	d     *Device
	bytes int64
	once  sync.Once
}

// reserve holds bytes of the arena, or fails with ErrOutOfMemory.
func (d *Device) reserve(bytes int64, what string) (*reservation, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if bytes < 0 || d.used+bytes > d.capacity {
		return nil, fmt.Errorf("%w: %s needs %s, %s of %s free", ErrOutOfMemory, what,
			FormatBytes(bytes), FormatBytes(d.capacity-d.used), FormatBytes(d.capacity))
	}
	d.used += bytes
	d.peak = max(d.peak, d.used)
	return &reservation{d: d, bytes: bytes}, nil
}

// release returns the bytes; calling it again does nothing.
func (r *reservation) release() {
	if r == nil {
		return
	}
	r.once.Do(func() {
		r.d.mu.Lock()
		r.d.used -= r.bytes
		r.d.mu.Unlock()
	})
}
