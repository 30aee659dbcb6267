package pipeline_test

import "syscall"

// childAttrs makes a test's child processes die with it, even when the test
// binary itself is killed: no NATS server or role is left behind.
func childAttrs() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
