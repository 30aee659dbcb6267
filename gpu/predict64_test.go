package gpu

import "context"

// predict64 evaluates the fitted model in float64 without any cache; tests
// use it as the reference the quantised paths are compared with.
func (c *contextFit) predict64(Xq [][]float64) []float64 {
	out := make([]float64, len(Xq))
	if c.constant {
		for i := range out {
			out[i] = c.pp.yMean
		}
		return out
	}
	zq, _ := c.pp.transform(Xq)
	n, f := c.n, c.f
	dA, d2 := newRowDists(n), make([]float64, 2*n)
	var buf []float64
	edges, _ := c.queryEdges(context.Background(), zq, len(Xq))
	for q := range Xq {
		x := zq[q*f : (q+1)*f]
		t := c.tr.eval(x, buf)
		p, far := c.trendW*t, 0.0
		if edges != nil && edges[q].u > 0 {
			far = c.farFor(edges[q]).trendW * t
		}
		for l := range c.layers {
			for h := range c.layers[l] {
				hd := &c.layers[l][h]
				wf := 0.0
				if edges != nil && edges[q].u > 0 {
					wf = c.farFor(edges[q]).w[l][h]
				}
				if hd.w == 0 && wf == 0 {
					continue
				}
				base := make([]float64, len(hd.inv))
				for d := range base {
					base[d] = hd.inv[d] * hd.spec.mult
				}
				dA.reset(-1)
				for j := range n {
					dA.base[j] = sqDist(x, c.z[j*f:(j+1)*f], base)
				}
				o := headOutput64(hd, dA, d2)
				p += hd.w * o
				far += wf * o
			}
		}
		if edges != nil {
			p += edges[q].u * (far - p)
		}
		out[q] = p*c.pp.yScale + c.pp.yMean
	}
	return out
}
