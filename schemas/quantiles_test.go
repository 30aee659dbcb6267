package schemas

import (
	"strings"
	"testing"
)

func TestQuantileColumn(t *testing.T) {
	for level, want := range map[float64]string{
		0.1: "p10", 0.9: "p90", 0.5: "p50", 0.025: "p2_5", 0.975: "p97_5",
		0.01: "p1", 0.99: "p99", 0.001: "p0_1", 0.07: "p7", 0.123: "p12_3", 0.05: "p5",
	} {
		if got := QuantileColumn(level); got != want {
			t.Errorf("QuantileColumn(%v) = %q, want %q", level, got, want)
		}
	}
}

func TestParseQuantiles(t *testing.T) {
	got, err := ParseQuantiles(" 0.9 0.1  0.025 0.9 ")
	if err != nil || len(got) != 3 || got[0] != 0.9 || got[1] != 0.1 || got[2] != 0.025 {
		t.Fatalf("ParseQuantiles = %v, %v; want [0.9 0.1 0.025] (order kept, repeat dropped)", got, err)
	}
	_, err = ParseQuantiles("0.1 1 0 -0.2 x 0.5")
	for _, bad := range []string{`"1"`, `"0"`, `"-0.2"`, `"x"`} {
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseQuantiles error %v does not name %s", err, bad)
		}
	}
	var many []string
	for i := 1; i <= 100; i++ {
		many = append(many, "0."+strings.Repeat("0", 3-len(itoa(i)))+itoa(i))
	}
	if _, err := ParseQuantiles(strings.Join(many, " ")); err == nil || !strings.Contains(err.Error(), "at most 99") {
		t.Errorf("100 levels: %v, want a refusal naming at most 99", err)
	}
	if got, err := ParseQuantiles(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestResultSchemaFor(t *testing.T) {
	if ResultSchemaFor(nil) != ResultSchema {
		t.Fatal("no levels: not ResultSchema")
	}
	s := ResultSchemaFor([]float64{0.1, 0.9})
	if s.NumFields() != 4 || s.Field(2).Name != "p10" || s.Field(3).Name != "p90" || !s.Field(3).Nullable {
		t.Fatalf("schema %s", s)
	}
}
