package gpu

// blockPredict is, for each row held out in blocks, the readouts'
// prediction as a query at that place gets it: (1−u)·near + u·far, moved
// toward the forest by the lean inside the range.
func (c *contextFit) blockPredict(blk *heldOut) []float64 {
	p := blk.blend(c.readoutWeights())
	fo := blk.cands[len(blk.cands)-1]
	var pb, pg []float64
	if c.edge.beyond != nil {
		pb, pg = blk.blendFar(c.edge.beyond), blk.blendFar(c.edge.gap)
	}
	for a := range p {
		if pb != nil {
			pf := pg[a]
			if blk.beyond[a] {
				pf = pb[a]
			}
			p[a] += farness(blk.dist[a]) * (pf - p[a])
		}
		if !blk.beyond[a] {
			p[a] += c.edge.lean * (fo[a] - p[a])
		}
	}
	return p
}

// leanOnForest sets the lean λ: a query inside the context's range (per
// column) is predicted (1−λ)·readouts + λ·forest. The ensemble selection
// weighs the forest like any head, on scattered rows for the near readout
// and on far block rows for the far ones; but a run of missing rows can
// differ from the context in ways no distance shows (a season whose level
// the features do not carry: airquality's September lies within the
// context's spacing), and there the smooth heads carry the context's
// relation on where the forest's averages of seen targets do not. λ is the
// least-squares share of the forest in a blend with what the readouts
// predict, clamped to [0, 1], on the held-out blocks (their rows inside
// the range of the blocks they were predicted from) and on the scattered
// rows, the two halves averaged: neither kind of query is known to be the
// one to come.
//
// The blocks' half is one share for all of them, each block's squared
// errors divided by its rows' spread about their mean: the share that
// maximises the mean of the blocks' R², as a run of missing rows is scored
// (each run by its own spread), so a block where the readouts fail by a
// wide margin — a run at the context's edge, where the season has moved —
// weighs by what is at stake there, and a block where forest and readouts
// agree adds nothing but its little. Each block's own share, clamped and
// averaged, gave those agreeing blocks a full vote each (their shares are
// the ratio of two small numbers: on airquality's contexts from −1.3 to
// 2.3) and left the edge blocks, which want the forest most, one vote.
//
// Past the range the readouts stay as chosen: there the beyond readout
// already weighs the forest on the rows that lay past their blocks' range,
// and leaning the near readout of queries just past the end of a trended
// series toward the forest's last level cost TestExtrapolationPastTheEnd's
// "trend and a covariate" (RMSE 0.84 → 0.88 against the line's 0.78).
func (c *contextFit) leanOnForest(near, blk *heldOut) {
	p := c.blockPredict(blk)
	fo := blk.cands[len(blk.cands)-1]
	var num, den, sst [blockCV]float64
	var rows [blockCV]int
	var sum [blockCV]float64
	for a := range p {
		b, t := blk.block[a], blk.target[a]
		sum[b], sst[b], rows[b] = sum[b]+t, sst[b]+t*t, rows[b]+1
		if !blk.beyond[a] {
			e, d := t-p[a], fo[a]-p[a]
			num[b], den[b] = num[b]+e*d, den[b]+d*d
		}
	}
	var spread float64 // the blocks' mean spread per row
	for b := range blockCV {
		if rows[b] > 0 {
			sst[b] = max(sst[b]-sum[b]*sum[b]/float64(rows[b]), 0)
			spread += sst[b] / float64(len(p))
		}
	}
	var bn, bd float64
	for b := range blockCV {
		if den[b] == 0 {
			continue
		}
		// A block's spread is floored at a tenth of the blocks' mean (and
		// a thousandth of the context's, the targets being standardised):
		// a block of one repeated target, whose R² any error ruins,
		// weighs at most about ten blocks, not all of them.
		s := max(sst[b], 0.1*spread*float64(rows[b]), 1e-3*float64(rows[b]))
		bn, bd = bn+num[b]/s, bd+den[b]/s
	}
	if bd == 0 {
		return
	}
	ps := near.blend(c.readoutWeights())
	fs := near.cands[len(near.cands)-1]
	var sn, sd float64
	for a := range ps {
		e, d := near.target[a]-ps[a], fs[a]-ps[a]
		sn, sd = sn+e*d, sd+d*d
	}
	c.edge.lean = (shareOf(bn, bd) + shareOf(sn, sd)) / 2
}

// shareOf is the least-squares share num/den of a blend, clamped to [0,
// 1] (0 when den is 0).
func shareOf(num, den float64) float64 {
	if !(den > 0) {
		return 0
	}
	return min(max(num/den, 0), 1)
}

// leaned is the output v (standardised) of the query at z, placed at e,
// moved toward the forest by the lean inside the context's range.
func (c *contextFit) leaned(e queryEdge, z []float64, v float64) float64 {
	if c.edge == nil || c.edge.lean == 0 || e.beyond || c.fo == nil {
		return v
	}
	return v + c.edge.lean*(c.fo.predict(z)-v)
}
