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

// Device is where the engine keeps its device buffers: the resident cache,
// a streamed layer, the GP solve's workspace, a query batch's score matrix.
// Every one is reserved before use and released after; a reservation past
// the device's memory fails with an error matching ErrOutOfMemory, and the
// memory ladder reacts to it. The CPU device (NewCPUDevice) is the one
// implementation today; a CUDA device would implement the same contract.
// A Device must be safe for concurrent use: predictions share one.
type Device interface {
	// Name says what the device is ("cpu").
	Name() string
	// Capacity is the device memory in bytes, what the policy's budget
	// fractions apply to.
	Capacity() int64
	// Used is the number of bytes reserved now.
	Used() int64
	// Reserve holds bytes of device memory for what (a short phrase for
	// error messages) until the returned reservation is released, or fails
	// with an error matching ErrOutOfMemory.
	Reserve(bytes int64, what string) (Reservation, error)
}

// Reservation is device memory held until Release. Release must be safe to
// call more than once (the later calls do nothing).
type Reservation interface {
	Release()
}

// CPUDevice computes on the host's cores and models device memory as an
// arena of fixed capacity: every device buffer is reserved against it, and
// a reservation past it fails with ErrOutOfMemory, so the memory ladder runs
// for real. (The bytes themselves live in the Go heap.) It is safe for
// concurrent use.
type CPUDevice struct {
	name     string
	capacity int64

	mu   sync.Mutex
	used int64
	peak int64
}

var _ Device = (*CPUDevice)(nil)

// NewCPUDevice returns a CPU device whose arena holds capacity bytes;
// capacity ≤ 0 assumes DefaultDeviceMemoryBytes (24 GiB), as the vendor does
// for an unknown card.
func NewCPUDevice(capacity int64) *CPUDevice {
	if capacity <= 0 {
		capacity = DefaultDeviceMemoryBytes
	}
	return &CPUDevice{name: "cpu", capacity: capacity}
}

// Name says what the device is.
func (d *CPUDevice) Name() string { return d.name }

// Capacity is the arena size in bytes.
func (d *CPUDevice) Capacity() int64 { return d.capacity }

// Used is the number of bytes reserved now.
func (d *CPUDevice) Used() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// Peak is the most bytes ever reserved at once; ResetPeak starts it again.
func (d *CPUDevice) Peak() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peak
}

// ResetPeak sets the peak to the current use.
func (d *CPUDevice) ResetPeak() {
	d.mu.Lock()
	d.peak = d.used
	d.mu.Unlock()
}

// Reserve holds bytes of the arena, or fails with ErrOutOfMemory.
func (d *CPUDevice) Reserve(bytes int64, what string) (Reservation, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if bytes < 0 || d.used+bytes > d.capacity {
		return nil, fmt.Errorf("%w: %s needs %s, %s of %s free", ErrOutOfMemory, what,
			FormatBytes(bytes), FormatBytes(d.capacity-d.used), FormatBytes(d.capacity))
	}
	d.used += bytes
	d.peak = max(d.peak, d.used)
	return &arenaReservation{d: d, bytes: bytes}, nil
}

// arenaReservation is bytes held in a CPUDevice's arena until Release.
type arenaReservation struct {
	d     *CPUDevice
	bytes int64
	once  sync.Once
}

// Release returns the bytes; calling it again does nothing.
func (r *arenaReservation) Release() {
	r.once.Do(func() {
		r.d.mu.Lock()
		r.d.used -= r.bytes
		r.d.mu.Unlock()
	})
}

// release releases res if there is one: the engine's reservations are
// optional (nil when none was taken).
func release(res Reservation) {
	if res != nil {
		res.Release()
	}
}
