// Package clstest makes classifier specs for tests: a shipped spec's
// shape with "task": "classify", registered under a new name on the
// shipped spec's kernels (the kernels do not depend on the task), so that
// kernels.For, checkpoint.Load and the CLI find them without a generated
// package of their own.
package clstest

import (
	"fmt"
	"sync"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

var (
	mu   sync.Mutex
	made = map[string]specs.Spec{}
)

// Spec returns the classifier of classes classes on the kernels of the
// linked spec base, named base + "_cls" + classes, registering it on first
// use.
func Spec(base string, classes int) (specs.Spec, error) {
	name := fmt.Sprintf("%s_cls%d", base, classes)
	mu.Lock()
	defer mu.Unlock()
	if s, ok := made[name]; ok {
		return s, nil
	}
	k, err := kernels.Lookup(base)
	if err != nil {
		return specs.Spec{}, err
	}
	sets, err := kernels.Sets(base)
	if err != nil {
		return specs.Spec{}, err
	}
	s := k.Spec
	s.Name = name
	s.Task, s.Classes = specs.TaskClassify, classes
	if err := s.Validate(); err != nil {
		return specs.Spec{}, err
	}
	kernels.Register(s, sets...)
	made[name] = s
	return s, nil
}
