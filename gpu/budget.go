package gpu

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultDeviceMemoryBytes is the device memory assumed when the card's size
// is neither detected nor configured (24 GiB, as the vendor assumes).
const DefaultDeviceMemoryBytes int64 = 24 << 30

// HostMemoryBytes is the host RAM the host budget applies to: the smaller of
// physical RAM (/proc/meminfo) and the process's cgroup memory limit (v2
// memory.max or v1 memory.limit_in_bytes, the tightest along the cgroup
// path). It returns 0 when neither is known, which disables fractional
// offload budgets.
func HostMemoryBytes() int64 { return hostMemoryBytes("/") }

// hostMemoryBytes reads the files under root so tests can fake a machine.
func hostMemoryBytes(root string) int64 {
	phys := memTotal(filepath.Join(root, "proc/meminfo"))
	limit := cgroupLimit(root)
	switch {
	case phys > 0 && limit > 0:
		return min(phys, limit)
	case phys > 0:
		return phys
	default:
		return limit
	}
}

// memTotal returns MemTotal from a meminfo file in bytes, or 0.
func memTotal(file string) int64 {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 {
			return 0
		}
		if len(fields) > 1 && !strings.EqualFold(fields[1], "kB") {
			return 0
		}
		return kb << 10
	}
	return 0
}

// cgroupLimit returns the tightest memory limit on this process's cgroup
// path (v2 first, then v1), or 0 when there is none.
func cgroupLimit(root string) int64 {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	var v2Path, v1Path string
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1Path = parts[2]
			}
		}
	}
	if v1Path != "" {
		if l := tightest(filepath.Join(root, "sys/fs/cgroup/memory"), v1Path, "memory.limit_in_bytes"); l > 0 {
			return l
		}
	}
	if v2Path != "" {
		return tightest(filepath.Join(root, "sys/fs/cgroup"), v2Path, "memory.max")
	}
	return 0
}

// tightest walks from the cgroup at rel up to the mount's root and returns
// the smallest limit found in file, or 0 for none. Inside a cgroup
// namespace the path is "/" and only the mount's root file is read.
func tightest(mount, rel, file string) int64 {
	var best int64
	for p := path.Clean("/" + rel); ; p = path.Dir(p) {
		if l := readLimit(filepath.Join(mount, filepath.FromSlash(p), file)); l > 0 && (best == 0 || l < best) {
			best = l
		}
		if p == "/" {
			return best
		}
	}
}

// readLimit parses one cgroup limit file; "max" and v1's near-MaxInt64
// sentinel mean no limit (0).
func readLimit(file string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0
	}
	return n
}

// byteUnits are the suffixes ParseBytes accepts. Device memory is quoted in
// binary units ("a 24 GB card" holds 24 GiB), so K/M/G/T and KB/MB/GB/TB are
// binary, like KiB/MiB/GiB/TiB.
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// ParseBytes parses a memory size such as "24GiB", "24GB", "1.5 GiB",
// "512MiB" or "1073741824" (bytes). Units are case-insensitive and binary
// (GB = GiB = 2^30 bytes). Negative sizes are refused.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB, GiB or TiB)", s, t[i:])
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: no number", s)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("size %q is negative", s)
		}
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number", s, num)
	}
	if f < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	b := f * float64(mult)
	if b >= math.MaxInt64 || math.IsNaN(b) {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(math.Round(b)), nil
}

// FormatBytes renders n in the largest binary unit that keeps it readable,
// with at most three decimals: "24GiB", "1.5GiB", "512MiB", "100B".
// ParseBytes reads it back (to within the decimals shown).
func FormatBytes(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.size || -n >= u.size {
			v := strconv.FormatFloat(float64(n)/float64(u.size), 'f', 3, 64)
			v = strings.TrimRight(strings.TrimRight(v, "0"), ".")
			return v + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// ByteSize is a memory size flag: fs.Var(&size, "device-memory", "…")
// accepts anything ParseBytes does. 0 means "not set".
type ByteSize int64

// Set implements flag.Value.
func (b *ByteSize) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = ByteSize(n)
	return nil
}

// String implements flag.Value.
func (b *ByteSize) String() string {
	if b == nil || *b == 0 {
		return "0"
	}
	return FormatBytes(int64(*b))
}
