package gateway

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
)

// refusal names why a request was refused, for the refusal counters.
type refusal string

// Refusal reasons counted by Server.Refusals.
const (
	refusedUnauthenticated refusal = "unauthenticated" // no or malformed Authorization
	refusedForbidden       refusal = "forbidden"       // unknown or revoked key
	refusedRateLimited     refusal = "rate_limited"    // the key's rate
	refusedBusy            refusal = "busy"            // the gate's queue full or its wait over
	refusedBodyTooLarge    refusal = "body_too_large"  // MaxBodyBytes
	refusedTooManyCells    refusal = "too_many_cells"  // MaxRows, MaxColumns or MaxCells
	refusedKeyCells        refusal = "key_cells"       // MaxKeyCells in flight for one key
	refusedInvalid         refusal = "invalid"         // any other 4xx
	refusedAbandoned       refusal = "abandoned"       // the caller left before the answer
	refusedSlowBody        refusal = "slow_body"       // the body not read within BodyReadTimeout
)

var refusalReasons = []refusal{
	refusedUnauthenticated, refusedForbidden, refusedRateLimited, refusedBusy,
	refusedBodyTooLarge, refusedTooManyCells, refusedKeyCells, refusedInvalid, refusedAbandoned, refusedSlowBody,
}

// refusals counts refused requests by reason.
type refusals struct{ n [10]atomic.Int64 } // one per refusalReasons

func (r *refusals) add(why refusal) {
	for i, k := range refusalReasons {
		if k == why {
			r.n[i].Add(1)
			return
		}
	}
}

// Refusals returns how many requests were refused since start, by reason:
// unauthenticated, forbidden, rate_limited, busy, body_too_large,
// too_many_cells, key_cells, invalid (any other 4xx), abandoned (the
// caller left before the answer; its work was stopped) and slow_body (the
// body did not arrive within BodyReadTimeout of the request's turn).
func (s *Server) Refusals() map[string]int64 {
	out := make(map[string]int64, len(refusalReasons))
	for i, k := range refusalReasons {
		out[string(k)] = s.refusals.n[i].Load()
	}
	return out
}

func (s *Server) refused(why refusal) { s.refusals.add(why) }

// keyCells is the cells each key has in flight (decoded and not yet
// answered), so one key's parallel requests cannot take all the memory.
type keyCells struct {
	mu sync.Mutex
	m  map[int64]int64
}

// requestBudget is one request's share of the caps, reserved row by row
// while its body is decoded and released when it is answered.
type requestBudget struct {
	cfg   *Config
	keys  *keyCells
	key   int64
	cells int64    // reserved by this request
	rows  [2]int64 // X_train, X_test rows so far
}

func (s *Server) newBudget(key int64) *requestBudget {
	return &requestBudget{cfg: &s.cfg, keys: &s.keyCells, key: key}
}

func (b *requestBudget) take(name string, rows int64, width int, cells int64) error {
	c := b.cfg
	if rows > 0 {
		i := 0
		if name == "X_test" {
			i = 1
		}
		if b.rows[i] += rows; b.rows[i] > int64(c.MaxRows) {
			return tooMany("%s has over %d rows, this gateway's limit per request", name, c.MaxRows)
		}
	}
	if width > c.MaxColumns {
		return tooMany("%s has %d columns, over this gateway's limit of %d per request", name, width, c.MaxColumns)
	}
	b.keys.mu.Lock()
	defer b.keys.mu.Unlock()
	if b.cells+cells > c.MaxCells {
		return tooMany("the request has over %d cells (rows × columns of X_train and X_test, plus y_train), this gateway's limit per request; send fewer rows per request", c.MaxCells)
	}
	if b.keys.m[b.key]+cells > c.MaxKeyCells {
		return &badRequest{status: http.StatusTooManyRequests, retryAfter: 2, reason: refusedKeyCells, msg: fmt.Sprintf(
			"this key's requests in flight hold over %d cells, its limit; wait for them to finish or send fewer rows", c.MaxKeyCells)}
	}
	b.cells += cells
	b.keys.m[b.key] += cells
	return nil
}

// release returns the request's cells to its key's allowance.
func (b *requestBudget) release() {
	b.keys.mu.Lock()
	defer b.keys.mu.Unlock()
	if b.keys.m[b.key] -= b.cells; b.keys.m[b.key] <= 0 {
		delete(b.keys.m, b.key)
	}
	b.cells = 0
}

func tooMany(format string, args ...any) error {
	return &badRequest{status: http.StatusRequestEntityTooLarge, reason: refusedTooManyCells, msg: fmt.Sprintf(format, args...)}
}
