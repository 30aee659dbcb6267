package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Consumer names a durable consumer of a stream.
type Consumer struct{ Stream, Name string }

// JetStreamConfig says what WatchJetStream asks the server at each scrape.
type JetStreamConfig struct {
	// Consumers whose pending and ack-pending counts are served.
	Consumers []Consumer
	// Streams whose message counts are served (e.g. the DLQ's).
	Streams []string
	// Timeout bounds the questions of one scrape. Default 2s.
	Timeout time.Duration
}

// WatchJetStream serves regressd_consumer_pending_messages,
// regressd_consumer_ack_pending_messages and
// regressd_consumer_redelivered_messages per consumer, and
// regressd_stream_messages per stream, read from js when scraped. A consumer
// or stream that does not exist yet is left out; any other failure to ask
// counts in regressd_jetstream_info_errors_total and leaves that one out.
// Every process sees the same numbers: aggregate them with max, not sum.
func (m *Metrics) WatchJetStream(js jetstream.JetStream, cfg JetStreamConfig) error {
	if m == nil {
		return nil
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	errs := prometheus.NewCounter(prometheus.CounterOpts{Name: NameJetStreamErrors,
		Help: "Scrapes that could not read a JetStream consumer's or stream's info (not counting one that does not exist yet)."})
	c := &jetStreamCollector{js: js, cfg: cfg, errs: errs,
		pending: prometheus.NewDesc(NameConsumerPending,
			"Messages of a stream its consumer has not yet delivered (JetStream consumer info num_pending).", []string{"stream", "consumer"}, nil),
		ackPending: prometheus.NewDesc(NameConsumerAcks,
			"Messages delivered to a consumer and not yet acknowledged (num_ack_pending).", []string{"stream", "consumer"}, nil),
		redelivered: prometheus.NewDesc(NameConsumerRedeliv,
			"Messages delivered to a consumer more than once and not yet acknowledged (num_redelivered).", []string{"stream", "consumer"}, nil),
		messages: prometheus.NewDesc(NameStreamMessages, "Messages a stream holds.", []string{"stream"}, nil),
	}
	return m.registerAll(errs, c)
}

type jetStreamCollector struct {
	js                                         jetstream.JetStream
	cfg                                        JetStreamConfig
	errs                                       prometheus.Counter
	pending, ackPending, redelivered, messages *prometheus.Desc
}

func (c *jetStreamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.ackPending
	ch <- c.redelivered
	ch <- c.messages
}

func (c *jetStreamCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	for _, k := range c.cfg.Consumers {
		cons, err := c.js.Consumer(ctx, k.Stream, k.Name)
		if err != nil {
			c.failed(err)
			continue
		}
		info := cons.CachedInfo()
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(info.NumPending), k.Stream, k.Name)
		ch <- prometheus.MustNewConstMetric(c.ackPending, prometheus.GaugeValue, float64(info.NumAckPending), k.Stream, k.Name)
		ch <- prometheus.MustNewConstMetric(c.redelivered, prometheus.GaugeValue, float64(info.NumRedelivered), k.Stream, k.Name)
	}
	for _, name := range c.cfg.Streams {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			c.failed(err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(s.CachedInfo().State.Msgs), name)
	}
}

// failed counts err unless it says the consumer or stream is not there yet.
func (c *jetStreamCollector) failed(err error) {
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return
	}
	c.errs.Inc()
}
