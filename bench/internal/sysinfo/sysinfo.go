package sysinfo

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU is the process's user and system CPU time so far.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MaxRSS is the process's peak resident set size in bytes: VmHWM from
// /proc/self/status, the high-water mark of this program's own memory.
// (getrusage's ru_maxrss is not used: a child inherits it from the
// parent's RSS at fork, so a small child of a big parent reports the
// parent's size.)
func MaxRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					return kb * 1024
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

// RSS is the process's current resident set size in bytes.
func RSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// Machine describes the machine.
type Machine struct {
	CPUModel string
	Cores    int
	MemTotal string
	Kernel   string
	GoVer    string
	GOOS     string
	GOARCH   string
	Load     string
}

// ReadMachine reads lscpu, nproc, /proc/meminfo and uname.
func ReadMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVer: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	if out, err := exec.Command("lscpu").Output(); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "Model name" {
				m.CPUModel = strings.TrimSpace(v)
			}
		}
	}
	if out, err := exec.Command("nproc").Output(); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
			m.Cores = n
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				m.MemTotal = strconv.FormatFloat(kb/1024/1024, 'f', 1, 64) + " GiB"
			}
		}
	}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return m
}

// Module is one module linked into the binary.
type Module struct{ Path, Version string }

// Modules returns the versions of the modules linked into the running
// binary, by path (replaced modules show their replacement).
func Modules() map[string]string {
	out := map[string]string{}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Path
			if d.Replace.Version != "" {
				v += "@" + d.Replace.Version
			}
		}
		out[d.Path] = v
	}
	return out
}
