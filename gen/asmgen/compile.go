package asmgen

import (
	"runtime"
	"slices"
	"sync"

	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/pass"
)

// Compile runs avo's compilation (pass.Compile) on f, with the same
// result, faster: the register allocation is allocateRegisters
// (regalloc.go), and the functions compile concurrently. pass.Compile runs
// each function pass over every function before the next pass; all of
// them but Verify and IncludeTextFlagHeader look at one function alone, so
// running a function's whole chain on a worker of its own gives the same
// file. Liveness and the register allocation dominated the generator's
// time (the long-row softmax-value kernels are thousands of instructions),
// and a package's dozens of kernels spread over the cores.
func Compile(f *ir.File) error {
	if err := pass.Verify.Execute(f); err != nil {
		return err
	}
	perFunction := slices.Concat(beforeAllocation, []func(*ir.Function) error{allocateRegisters}, afterAllocation)
	fns := f.Functions()
	errs := make([]error, len(fns))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(fns)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				for _, p := range perFunction {
					if errs[k] = p(fns[k]); errs[k] != nil {
						break
					}
				}
			}
		}()
	}
	// Longest first, so that the largest kernel does not start last.
	order := make([]int, len(fns))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(fns[b].Nodes) - len(fns[a].Nodes) })
	for _, k := range order {
		next <- k
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return pass.IncludeTextFlagHeader(f)
}

// beforeAllocation and afterAllocation are pass.Compile's function passes
// on either side of its register allocation, in its order, but for
// pass.Liveness: allocateRegisters computes the same sets itself
// (liveness.go), and no later pass reads them.
var (
	beforeAllocation = []func(*ir.Function) error{
		pass.PruneJumpToFollowingLabel,
		pass.PruneDanglingLabels,
		pass.LabelTarget,
		pass.CFG,
		func(fn *ir.Function) error {
			for _, i := range fn.Instructions() {
				if err := pass.ZeroExtend32BitOutputs(i); err != nil {
					return err
				}
			}
			return nil
		},
	}
	afterAllocation = []func(*ir.Function) error{
		pass.BindRegisters,
		pass.VerifyAllocation,
		pass.EnsureBasePointerCalleeSaved,
		pass.PruneSelfMoves,
		pass.RequiredISAExtensions,
	}
)
