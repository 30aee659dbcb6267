package bench

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// percentile is the p-th percentile (0..100) of ds by nearest rank, in ms.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	i = max(0, min(i, len(s)-1))
	return ms(s[i])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rate is n per second over d; 0 when d is 0.
func rate(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

// ratio is a/b; 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// procStatus reads a "kB" line of /proc/self/status (VmRSS, VmHWM) in bytes.
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// resetPeakRSS makes VmHWM start again from the current RSS, so each phase
// reports its own peak. It reports false where the kernel does not allow it;
// the peak is then the process's since it started.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is the peak resident set since the last reset, in bytes.
func peakRSS() int64 {
	if v := procStatus("VmHWM"); v > 0 {
		return v
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		return ru.Maxrss << 10 // kB on Linux
	}
	return 0
}

// cpuTime is the CPU time this process has used (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clusterCPU is the CPU time of a local PostgreSQL cluster: the postmaster
// named in dataDir/postmaster.pid and its children (backends that exited
// are not counted). It returns 0 when the cluster cannot be read.
func clusterCPU(dataDir string) time.Duration {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pm, _, _ := strings.Cut(string(b), "\n")
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces): state ppid … utime(14) stime(15).
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 13 {
			continue
		}
		pid, _, _ := strings.Cut(string(b), " ")
		if pid != pm && f[1] != pm {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on Linux
}
