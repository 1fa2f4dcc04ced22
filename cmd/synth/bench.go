package main

import "errors"

// runBench is a placeholder; the lead engineer's bench.go replaces it.
func runBench(args []string) error { return errors.New("bench: not implemented yet") }
