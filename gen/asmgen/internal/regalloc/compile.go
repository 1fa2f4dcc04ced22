package regalloc

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/reg"
)

// Compile runs avo's compilation (pass.Compile) on f, with the same
// result, faster: the register allocation is Allocate (regalloc.go), and
// the functions compile concurrently. pass.Compile runs
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
	perFunction := slices.Concat(BeforeAllocation, []func(*ir.Function) error{Allocate}, afterAllocation)
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

// BeforeAllocation and afterAllocation are pass.Compile's function passes
// on either side of its register allocation, in its order, but for
// pass.Liveness: Allocate computes the same sets itself (liveness.go), and
// no later pass reads them. BeforeAllocation is exported for the test that
// compares Allocate with avo's allocator on every kernel (in package
// asmgen, which emits them).
var (
	BeforeAllocation = []func(*ir.Function) error{
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
		checkVEXRegisters,
	}
)

// checkVEXRegisters fails a function whose instructions need no AVX-512
// extension but whose allocation gave it a vector register X16–X31,
// Y16–Y31 or Z16–Z31: those exist only in the EVEX encoding, so the AVX2
// level would stop with an illegal instruction on a CPU without AVX-512.
// The allocator draws on all 32 vector registers, whatever the level, so
// an AVX2 kernel with more than 16 vectors live at once must be rewritten.
func checkVEXRegisters(fn *ir.Function) error {
	for _, isa := range fn.ISA {
		if strings.HasPrefix(isa, "AVX512") {
			return nil
		}
	}
	for _, i := range fn.Instructions() {
		for _, op := range i.Operands {
			r, ok := op.(reg.Physical)
			if !ok || r.Kind() != reg.KindVector || r.PhysicalIndex() < 16 {
				continue
			}
			return fmt.Errorf("%s: %s uses %s, which needs AVX-512, in a function that needs only %s",
				fn.Name, i.Opcode, r.Asm(), strings.Join(fn.ISA, ", "))
		}
	}
	return nil
}
