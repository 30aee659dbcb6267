package gpu

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// fakeMachine writes files (relative path → content) under a temp root.
func fakeMachine(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestHostMemoryBytes(t *testing.T) {
	const meminfo = "MemTotal:       16384000 kB\nMemFree:         1000 kB\n"
	const phys = int64(16384000) << 10
	tests := []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"nothing known", nil, 0},
		{"physical only", map[string]string{"proc/meminfo": meminfo}, phys},
		{"v2 unlimited", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"}, phys},
		{"v2 limit in namespace", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30},
		{"v2 nested, parent tighter", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "1073741824\n",
			"sys/fs/cgroup/kubepods/memory.max":         "4294967296\n",
		}, 1 << 30},
		{"v2 limit above RAM", map[string]string{
			"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "107374182400\n"}, phys},
		{"v2 limit without meminfo", map[string]string{
			"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30},
		{"v1 limit", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "12:cpu,cpuacct:/docker/abc\n11:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "536870912\n",
		}, 512 << 20},
		{"v1 unlimited sentinel", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "11:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, phys},
		{"garbage", map[string]string{
			"proc/meminfo": "MemTotal: lots\n", "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "plenty\n"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeMachine(t, tt.files)
			if got := hostMemoryBytes(root); got != tt.want {
				t.Fatalf("hostMemoryBytes=%d, want %d", got, tt.want)
			}
		})
	}
}

func TestHostMemoryBytesHere(t *testing.T) {
	// On Linux CI this machine has RAM; elsewhere 0 is the documented answer.
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo on this system")
	}
	if got := HostMemoryBytes(); got <= 0 {
		t.Fatalf("HostMemoryBytes()=%d on a machine with /proc/meminfo", got)
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "24GiB", want: 24 << 30},
		{in: "24GB", want: 24 << 30},
		{in: "24g", want: 24 << 30},
		{in: " 1.5 GiB ", want: 3 << 29},
		{in: "512MiB", want: 512 << 20},
		{in: "512mb", want: 512 << 20},
		{in: "64KiB", want: 64 << 10},
		{in: "1TiB", want: 1 << 40},
		{in: "1073741824", want: 1 << 30},
		{in: "100B", want: 100},
		{in: "0", want: 0},
		{in: "", bad: true},
		{in: "GiB", bad: true},
		{in: "-1GiB", bad: true},
		{in: "24XB", bad: true},
		{in: "1.2.3GiB", bad: true},
		{in: "99999999999TiB", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("ParseBytes(%q)=%d, want error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseBytes(%q)=%d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		24 << 30: "24GiB", 3 << 29: "1.5GiB", 512 << 20: "512MiB", 100: "100B", 1 << 40: "1TiB", 1536: "1.5KiB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d)=%q, want %q", n, got, want)
		}
		if back, err := ParseBytes(FormatBytes(n)); err != nil || back != n {
			t.Errorf("ParseBytes(FormatBytes(%d))=%d, %v", n, back, err)
		}
	}
}

func TestByteSizeFlag(t *testing.T) {
	var size ByteSize
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(discard))
	fs.Var(&size, "device-memory", "device memory")
	if err := fs.Parse([]string{"--device-memory", "8GiB"}); err != nil {
		t.Fatal(err)
	}
	if size != 8<<30 || size.String() != "8GiB" {
		t.Fatalf("size=%d (%s), want 8GiB", size, size.String())
	}
	if err := fs.Parse([]string{"--device-memory", "lots"}); err == nil {
		t.Fatal("bad size accepted")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
