package largectx

import "github.com/regressd/regressd/gpu"

// ReasonBelowThreshold is Report.Reason when the context was at or below the
// threshold, so the policy did not apply.
const ReasonBelowThreshold = "below_threshold"

// Report says what one Predict did about the large-context policy. Its JSON
// is the reference's large_context_report, field for field; a null field is
// one that does not apply (see each).
type Report struct {
	// Applied is true when the context had more rows than Threshold and
	// the policy chose the contexts of the internal calls.
	Applied bool `json:"applied"`
	// Policy is the policy as resolved (Policy.String), also when it did
	// not apply.
	Policy string `json:"policy"`
	// Threshold is the row threshold honoured.
	Threshold int `json:"threshold"`
	// Seed is the seed honoured.
	Seed uint32 `json:"seed"`
	// HoldoutStrategy is "random" or "tail" when a gate chose the policy;
	// null otherwise.
	HoldoutStrategy *string `json:"holdout_strategy"`
	// Reason is "below_threshold" when not applied; null otherwise.
	Reason *string `json:"reason"`
	// Window is the most context rows one internal call took; null when
	// not applied.
	Window *int `json:"window"`
	// NTrain is the context rows of the request.
	NTrain int `json:"n_train"`
	// NTest is the query rows of this call.
	NTest int `json:"n_test"`
	// ShardsAvailable is how many whole windows the context holds
	// (NTrain / Window); null when not applied.
	ShardsAvailable *int `json:"shards_available"`
	// NoriCalls counts the internal engine calls this Predict made — one
	// per context that answered queries, including a gate's calls on its
	// holdout; 0 when the policy did not apply (the context was fitted
	// whole, as without a policy), as the vendor reports.
	NoriCalls int `json:"nori_calls"`
	// FullContext is true when the policy applied but the whole context
	// fit one window, so one call took it all; null when not applied.
	FullContext *bool `json:"full_context"`
	// ReusedTrainState is true when this call used work an earlier call
	// on the same Model derived from the context: fitted windows, the
	// clustering, a gate's choice.
	ReusedTrainState bool `json:"reused_train_state"`
	// GateWinner is the candidate a gate deployed; null without a gate.
	GateWinner *string `json:"gate_winner"`

	// Memory holds the memory report of each internal call of this
	// Predict, in window order (one when not applied). Not part of the
	// wire report: a server picks what its memory_report says.
	Memory []gpu.MemoryReport `json:"-"`
}

func ptr[T any](v T) *T { return &v }
