// Package sysinfo reads what the benchmark report needs from the machine
// and the process: CPU time (getrusage), peak RSS (VmHWM), current RSS
// (/proc/self/statm), the CPU model, core count and memory, and the
// versions of the modules linked into the binary.
package sysinfo
