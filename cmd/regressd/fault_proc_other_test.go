//go:build !linux

package main

import "syscall"

// childAttrs: no parent-death signal outside Linux; the tests' cleanups kill
// their children.
func childAttrs() *syscall.SysProcAttr { return nil }
