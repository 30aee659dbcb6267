package gpu

import (
	"context"
	"testing"
)

// TestSkippedLayersSameBits: forward skips, per layer, the queries none of
// whose heads the readouts weigh (layerQueries), and a layer no query
// needs is not even read, and the quads no readout weighs (layerQuads)
// are not scored; the stream path scores every layer for every
// query, so the two agreeing bit for bit says the skipped work reduced
// nothing. The fixture must skip something, or the test proves nothing.
func TestSkippedLayersSameBits(t *testing.T) {
	c := streamFit(t, 600, 0)
	Xq, _ := synth(300, 4, 23)
	zq, err := c.pp.transformRows(Xq, false)
	if err != nil {
		t.Fatal(err)
	}
	_, _, edges, err := c.forwardStart(context.Background(), zq, len(Xq))
	if err != nil {
		t.Fatal(err)
	}
	skipped, quadsSkipped := 0, 0
	for l := range c.layers {
		skipped += len(Xq) - len(c.layerQueries(l, len(Xq), edges))
		for _, s := range c.layerQuads(l) {
			if s {
				quadsSkipped++
			}
		}
	}
	if quadsSkipped == 0 {
		t.Fatal("no layer skips a quad on this fixture")
	}
	if skipped == 0 {
		t.Fatal("no layer skips a query on this fixture: choose one whose readout leaves a layer unweighted")
	}
	t.Logf("%d of %d query-layer passes skipped, %d of %d quads", skipped, len(Xq)*len(c.layers), quadsSkipped, quads*len(c.layers))
	want := mustPredict(t, onFit(t, c, `{"stream_context": true, "context_row_chunk": 64}`, WithHostMemory(1<<30)), Xq)
	got := mustPredict(t, onFit(t, c, `{}`), Xq)
	sameBits(t, "resident (layers skipped) vs stream", want, got)
}
