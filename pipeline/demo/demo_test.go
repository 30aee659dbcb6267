package demo

import "testing"

// The sample is the same every time: the same days, the same gaps.
func TestRowsHaveGapsInRuns(t *testing.T) {
	a, err := Rows()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Rows()
	if len(a) < 1000 || len(a) != len(b) {
		t.Fatalf("%d and %d rows", len(a), len(b))
	}
	gaps := 0
	for i, r := range a {
		if r.Gap != b[i].Gap || r.TMax != b[i].TMax {
			t.Fatalf("row %d differs between reads", i)
		}
		if r.Gap {
			gaps++
		}
	}
	if g := Gaps(a); g != gaps || g < len(a)/100 || g > len(a)/4 {
		t.Fatalf("%d gaps of %d rows", g, len(a))
	}
}
