package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Off a terminal, a bar writes a line at most once per interval and one at
// the end, with the counts and the detail.
func TestBarOffATerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "replay", 4, time.Hour)
	b.Add(1)
	b.Detail("3 rows written")
	b.Add(1)
	if buf.Len() != 0 {
		t.Fatalf("wrote before its interval: %q", buf.String())
	}
	b.Set(4)
	b.Finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "4/4") || !strings.Contains(lines[0], "3 rows written") || !strings.HasPrefix(lines[0], "replay") {
		t.Fatalf("lines %q", lines)
	}

	buf.Reset()
	b = New(&buf, "generate", 2, time.Nanosecond)
	b.Add(1)
	time.Sleep(time.Millisecond)
	b.Add(1)
	b.Finish()
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Fatalf("%d lines with an interval of 1ns, want one per step and one at the end:\n%s", n, buf.String())
	}
}
