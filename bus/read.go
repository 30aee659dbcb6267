package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadAll reads, in order, the messages a consumer (an ordered one, as a
// reader of a stream's history uses) had pending when it was called, and
// hands each with its metadata to f until f returns false. Messages removed
// from the stream meanwhile end the read early.
func ReadAll(ctx context.Context, cons jetstream.Consumer, f func(jetstream.Msg, *jetstream.MsgMetadata) bool) error {
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	for left := info.NumPending; left > 0; {
		batch, err := cons.Fetch(int(min(left, 256)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			left = meta.NumPending
			if !f(msg, meta) {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if got == 0 {
			break // removed meanwhile
		}
	}
	return nil
}
