package gpu

import (
	"context"
	"slices"
)

// forest is a small random forest on the standardised context: one more
// readout candidate, of another kind than the heads. Its prediction is an
// average of context targets, so it never leaves their range, and a split
// reads one column at a time, so a column that moves out of the context's
// range (a season, a sensor's drift) changes it no more than the last split
// on that column does. Where the smooth heads carry a run of missing rows
// or a shifted column too far, the readouts chosen on the context's own
// contiguous blocks (blockcv.go) can lean on it; on scattered rows it is
// scored by its out-of-bag predictions, which cost nothing extra.
//
// Trees are grown on a bootstrap sample (at most forestRows draws) on
// columns binned at up to forestBins quantiles, to leaves of at least
// forestLeaf draws, each split chosen among half the columns (drawn per
// node): half the cost of all of them, and a shifted column splits fewer
// trees (airquality's random splits 0.713 with every column, 0.727 with
// half; BENCHMARKS.md). Each tree draws from its own stream, seeded by a
// hash of its index, so the forest does not depend on the cores that grew
// it. 64 trees on 1,000 rows × 8 columns cost about 30 ms of CPU; Fit grows
// one on the context and one per held-out block (and per fold on a small
// context).
type forest struct {
	nodes []forestNode
	roots []int32
}

// forestNode is a split (feat ≥ 0: rows with z[feat] ≤ thr go to left,
// the others to left+1) or a leaf (feat < 0) predicting value.
type forestNode struct {
	feat  int32
	left  int32
	thr   float64
	value float64
}

const (
	forestTrees = 64
	forestRows  = 2048 // bootstrap draws per tree, at most
	forestBins  = 64
	forestLeaf  = 2  // fewest draws in a leaf
	forestDepth = 18 // deepest split
)

// predict is the forest's prediction at the standardised point z.
func (fo *forest) predict(z []float64) float64 {
	if len(fo.roots) == 0 {
		return 0
	}
	var s float64
	for _, r := range fo.roots {
		s += fo.nodes[fo.leaf(r, z)].value
	}
	return s / float64(len(fo.roots))
}

// leaf is the index of the leaf of the tree at root that z falls in.
func (fo *forest) leaf(root int32, z []float64) int32 {
	k := root
	for {
		nd := &fo.nodes[k]
		if nd.feat < 0 {
			return k
		}
		if z[nd.feat] <= nd.thr {
			k = nd.left
		} else {
			k = nd.left + 1
		}
	}
}

// binning is each column's cut points and each cell's bin: bin b holds the
// values in (cuts[b−1], cuts[b]].
type binning struct {
	cuts [][]float64
	bins []uint8 // n×f
}

func newBinning(z []float64, n, f int) *binning {
	b := &binning{cuts: make([][]float64, f), bins: make([]uint8, n*f)}
	col := make([]float64, n)
	for d := range f {
		for i := range n {
			col[i] = z[i*f+d]
		}
		slices.Sort(col)
		var cuts []float64
		for k := 1; k < forestBins; k++ {
			a := k * n / forestBins
			if a <= 0 || a >= n {
				continue
			}
			lo, hi := col[a-1], col[a]
			if lo == hi {
				// Move the cut to the next change of value, if any.
				j, _ := slices.BinarySearch(col, hi)
				for j < n && col[j] == hi {
					j++
				}
				if j >= n {
					continue
				}
				lo, hi = col[j-1], col[j]
			}
			c := lo + (hi-lo)/2
			if len(cuts) == 0 || c > cuts[len(cuts)-1] {
				cuts = append(cuts, c)
			}
		}
		b.cuts[d] = cuts
		for i := range n {
			v := z[i*f+d]
			k, _ := slices.BinarySearch(cuts, v) // first cut ≥ v
			b.bins[i*f+d] = uint8(k)
		}
	}
	return b
}

// fitForest grows the forest on the n×f rows z with targets y. With oob
// non-nil it also writes each row's out-of-bag prediction there (the mean
// of the trees whose sample left the row out; y's mean for a row every
// tree drew). It stops with an error wrapping ctx.Err() once ctx ends.
func fitForest(ctx context.Context, z []float64, n, f int, y []float64, oob []float64) (*forest, error) {
	bn := newBinning(z, n, f)
	trees := make([][]forestNode, forestTrees)
	drawn := make([][]int32, forestTrees) // each tree's draw count per row, for oob
	err := parallelFor(ctx, forestTrees, 1, func(lo, hi int) {
		g := newTreeGrower(bn, n, f, y)
		for t := lo; t < hi; t++ {
			trees[t], drawn[t] = g.grow(uint64(t), oob != nil)
		}
	})
	if err != nil {
		return nil, err
	}
	// The forest's nodes in one allocation: appending tree by tree
	// reallocated them a dozen times per forest.
	total := 0
	for _, tr := range trees {
		total += len(tr)
	}
	fo := &forest{nodes: make([]forestNode, 0, total), roots: make([]int32, 0, len(trees))}
	for _, tr := range trees {
		base := int32(len(fo.nodes))
		fo.roots = append(fo.roots, base)
		for _, nd := range tr {
			if nd.feat >= 0 {
				nd.left += base
			}
			fo.nodes = append(fo.nodes, nd)
		}
	}
	if oob == nil {
		return fo, nil
	}
	var mean float64
	for _, v := range y {
		mean += v
	}
	mean /= float64(n)
	err = parallelFor(ctx, n, 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			var s float64
			m := 0
			for t, r := range fo.roots {
				if drawn[t][i] == 0 {
					s += fo.nodes[fo.leaf(r, z[i*f:(i+1)*f])].value
					m++
				}
			}
			oob[i] = mean
			if m > 0 {
				oob[i] = s / float64(m)
			}
		}
	})
	return fo, err
}

// treeGrower is one goroutine's working memory for growing trees.
type treeGrower struct {
	bn         *binning
	n, f, mtry int
	y          []float64
	cnt        []int32   // draws of each row in the current tree
	rows       []int32   // the drawn rows, partitioned node by node
	hw, hy     []float64 // histograms: draws and draws·y per bin
	feats      []int
	rng        uint64
	nodes      []forestNode // the tree being grown
	stack      []growItem
}

func newTreeGrower(bn *binning, n, f int, y []float64) *treeGrower {
	mtry := (f + 1) / 2 // columns tried per split
	return &treeGrower{bn: bn, n: n, f: f, mtry: mtry, y: y, cnt: make([]int32, n),
		hw: make([]float64, forestBins), hy: make([]float64, forestBins), feats: make([]int, f)}
}

func (g *treeGrower) next() uint64 {
	g.rng += 0x9e3779b97f4a7c15
	z := g.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// grow grows tree seed and returns its nodes (root first) and, when
// keepDraws, its draw count per row.
func (g *treeGrower) grow(seed uint64, keepDraws bool) ([]forestNode, []int32) {
	// Each tree's stream starts at a hash of its seed: consecutive seeds
	// on one splitmix64 sequence would share all but one draw.
	g.rng = seed
	g.rng = g.next()
	n := g.n
	clear(g.cnt)
	for range min(n, forestRows) {
		g.cnt[g.next()%uint64(n)]++
	}
	g.rows = g.rows[:0]
	for i, c := range g.cnt {
		if c > 0 {
			g.rows = append(g.rows, int32(i))
		}
	}
	// Nodes grow in the grower's buffer, kept from tree to tree; the
	// tree gets an exact copy.
	nodes := append(g.nodes[:0], forestNode{})
	stack := append(g.stack[:0], growItem{0, 0, len(g.rows), 0})
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		feat, thr, mid, value := g.split(it.lo, it.hi, it.depth)
		if feat < 0 {
			nodes[it.node] = forestNode{feat: -1, value: value}
			continue
		}
		left := len(nodes)
		nodes = append(nodes, forestNode{}, forestNode{})
		nodes[it.node] = forestNode{feat: int32(feat), left: int32(left), thr: thr}
		stack = append(stack, growItem{left + 1, mid, it.hi, it.depth + 1}, growItem{left, it.lo, mid, it.depth + 1})
	}
	g.nodes, g.stack = nodes, stack
	var draws []int32
	if keepDraws {
		draws = slices.Clone(g.cnt)
	}
	return slices.Clone(nodes), draws
}

// growItem is a node waiting to be split: rows[lo:hi] at depth.
type growItem struct {
	node, lo, hi, depth int
}

// split finds the best split of rows[lo:hi] over a random choice of mtry
// columns and partitions the rows (left part first, ending at mid); feat
// < 0 makes the node a leaf predicting value.
func (g *treeGrower) split(lo, hi, depth int) (feat int, thr float64, mid int, value float64) {
	rows := g.rows[lo:hi]
	var sw, sy float64
	for _, i := range rows {
		w := float64(g.cnt[i])
		sw += w
		sy += w * g.y[i]
	}
	value = sy / sw
	if depth >= forestDepth || sw < 2*forestLeaf {
		return -1, 0, 0, value
	}
	for d := range g.f {
		g.feats[d] = d
	}
	// A partial Fisher–Yates draws the mtry columns.
	for k := range g.mtry {
		j := k + int(g.next()%uint64(g.f-k))
		g.feats[k], g.feats[j] = g.feats[j], g.feats[k]
	}
	best, bestBin := sy*sy/sw+1e-12*sw, -1
	bestFeat := -1
	f, bins := g.f, g.bn.bins
	for _, d := range g.feats[:g.mtry] {
		nb := len(g.bn.cuts[d]) + 1
		if nb < 2 {
			continue
		}
		// Only the bins the node's rows fall in are filled, scanned and
		// cleared again: a deep node's rows fill a few of them.
		hw, hy := g.hw[:nb], g.hy[:nb]
		bmin, bmax := nb, 0
		for _, i := range rows {
			b := int(bins[int(i)*f+d])
			bmin, bmax = min(bmin, b), max(bmax, b)
			w := float64(g.cnt[i])
			hw[b] += w
			hy[b] += w * g.y[i]
		}
		var lw, ly float64
		for b := bmin; b < bmax; b++ {
			if hw[b] == 0 {
				continue
			}
			lw += hw[b]
			ly += hy[b]
			rw := sw - lw
			if lw < forestLeaf {
				continue
			}
			if rw < forestLeaf {
				break
			}
			ry := sy - ly
			// A split must beat the best so far by more than rounding,
			// so that near-ties (two columns cutting the drawn rows
			// alike) go to the first, whatever the target's scale.
			// Most cuts fall clearly short: the same test multiplied
			// through by lw·rw (no division), with a margin far above
			// its rounding, rejects them before the divisions that
			// decide the others.
			bar := best * (1 + 1e-10)
			if ly*ly*rw+ry*ry*lw < bar*lw*rw*(1-1e-12) {
				continue
			}
			if s := ly*ly/lw + ry*ry/rw; s > bar {
				best, bestBin, bestFeat = s, b, d
			}
		}
		clear(hw[bmin : bmax+1])
		clear(hy[bmin : bmax+1])
	}
	if bestFeat < 0 {
		return -1, 0, 0, value
	}
	// Partition: bins ≤ bestBin first.
	a, e := 0, len(rows)
	for a < e {
		if int(bins[int(rows[a])*f+bestFeat]) <= bestBin {
			a++
		} else {
			e--
			rows[a], rows[e] = rows[e], rows[a]
		}
	}
	return bestFeat, g.bn.cuts[bestFeat][bestBin], lo + a, value
}
