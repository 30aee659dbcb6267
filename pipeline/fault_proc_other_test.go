//go:build !linux

package pipeline_test

import "syscall"

// childAttrs: no parent-death signal outside Linux; the tests' cleanups kill
// their children.
func childAttrs() *syscall.SysProcAttr { return nil }
