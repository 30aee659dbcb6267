package bus

// DeadLetterReason is the bounded class of a dead letter's reason, for
// counting (the reason's text goes with the dead letter).
type DeadLetterReason string

// Dead-letter reason classes; the metrics package's Reason values.
const (
	ReasonPermanent     DeadLetterReason = "permanent"      // the handler said retrying cannot help
	ReasonSchemaVersion DeadLetterReason = "schema_version" // a message of another schema version
	ReasonPanic         DeadLetterReason = "panic"          // the handler panicked
	ReasonGaveUp        DeadLetterReason = "gave_up"        // the handler failed at its last delivery
	ReasonMaxDeliveries DeadLetterReason = "max_deliveries" // never acknowledged: MAX_DELIVERIES advisory
)

// DeadLetterCounter counts messages copied to the DLQ by origin stream and
// reason class; *metrics.Metrics is one.
type DeadLetterCounter interface {
	CountDeadLetter(stream, reason string)
}

func (c ConsumerConfig) countDeadLetter(stream string, class DeadLetterReason) {
	if c.DeadLetters != nil {
		c.DeadLetters.CountDeadLetter(stream, string(class))
	}
}
