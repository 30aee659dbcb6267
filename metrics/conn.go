package metrics

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// WatchNATS serves the NATS connection's traffic, reconnects and state,
// read at every scrape.
func (m *Metrics) WatchNATS(nc *nats.Conn) error {
	if m == nil {
		return nil
	}
	return m.registerAll(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: NameNATSInBytes, Help: "Bytes this process received from NATS."},
			func() float64 { return float64(nc.Stats().InBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: NameNATSOutBytes, Help: "Bytes this process sent to NATS."},
			func() float64 { return float64(nc.Stats().OutBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: NameNATSReconnects, Help: "Times this process reconnected to NATS."},
			func() float64 { return float64(nc.Stats().Reconnects) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: NameNATSConnected, Help: "1 while this process is connected to NATS."},
			func() float64 { return b2f(nc.IsConnected()) }),
	)
}

// WatchDBPool serves the database pool's connections and waits, read at
// every scrape.
func (m *Metrics) WatchDBPool(pool *pgxpool.Pool) error {
	if m == nil {
		return nil
	}
	return m.registerAll(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: NameDBConns, Help: "Open connections of this process's database pool."},
			func() float64 { return float64(pool.Stat().TotalConns()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: NameDBAcquiredConns, Help: "Connections of the pool in use now."},
			func() float64 { return float64(pool.Stat().AcquiredConns()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: NameDBAcquireWaits, Help: "Acquires that waited because every connection of the pool was in use."},
			func() float64 { return float64(pool.Stat().EmptyAcquireCount()) }),
	)
}

// registerAll registers every collector or, if one fails, none.
func (m *Metrics) registerAll(cs ...prometheus.Collector) error {
	for i, c := range cs {
		if err := m.reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				m.reg.Unregister(done)
			}
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
