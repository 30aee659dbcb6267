//go:build unix

package gpu

import "syscall"

// cpuSeconds is the process's user and system CPU time: on a loaded
// machine, a single-threaded benchmark's rate per CPU second is steadier
// than per wall second.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)*1e-6
}
