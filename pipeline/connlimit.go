package pipeline

// A cap on a server's open connections that a flood of stalled ones
// cannot use to lock out the rest.

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// connLimiter caps the connections its listener holds open. At the cap, a
// new connection evicts the oldest one that is not serving a request (one
// still sending its headers, or idle between requests): a slow or stalled
// client cannot lock out the next one, and the process never runs out of
// file descriptors. With every connection serving a request, the new one
// is closed at once. Its state hook must be the server's ConnState.
type connLimiter struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[net.Conn]*list.Element // of *trackedConn, oldest first
	order list.List

	evicted, refused atomic.Int64
}

type trackedConn struct {
	c      net.Conn
	active bool
}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, conns: map[net.Conn]*list.Element{}}
}

// Accept returns the next connection, making room for it.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if len(l.conns) >= l.max {
			victim := l.oldestWaiting()
			if victim == nil {
				l.mu.Unlock()
				l.refused.Add(1)
				c.Close()
				continue
			}
			l.forget(victim)
			victim.Close() // its server goroutine sees the error and ends
			l.evicted.Add(1)
		}
		l.conns[c] = l.order.PushBack(&trackedConn{c: c})
		l.mu.Unlock()
		return c, nil
	}
}

// oldestWaiting is the oldest connection not serving a request; nil when
// every one is. Callers hold mu.
func (l *connLimiter) oldestWaiting() net.Conn {
	for e := l.order.Front(); e != nil; e = e.Next() {
		if t := e.Value.(*trackedConn); !t.active {
			return t.c
		}
	}
	return nil
}

func (l *connLimiter) forget(c net.Conn) {
	if e, ok := l.conns[c]; ok {
		l.order.Remove(e)
		delete(l.conns, c)
	}
}

// state follows the server's view of each connection (http.Server's
// ConnState): an idle one moves to the back, as the newest to wait.
func (l *connLimiter) state(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.conns[c]
	if !ok {
		return
	}
	switch s {
	case http.StateClosed, http.StateHijacked:
		l.forget(c)
	case http.StateActive:
		e.Value.(*trackedConn).active = true
	case http.StateIdle:
		e.Value.(*trackedConn).active = false
		l.order.MoveToBack(e)
	}
}

// open is the number of connections held.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
