// Package regalloc compiles the generator's avo files: it is avo's
// pass.Compile (github.com/mmcloughlin/avo's pass package, v0.6.0) with the
// same output, in a fraction of its time, plus one check avo lacks.
//
// What it adapts from avo, and why:
//
//   - Allocate (regalloc.go) is pass.AllocateRegisters: the same greedy
//     colouring, the same choices and the same errors, but each virtual
//     register keeps its interference neighbours in a list built once and
//     the next one to colour comes from a heap. avo rescans every remaining
//     interference edge after each allocation, which is quadratic in a
//     function's length; on the long-row softmax-value kernels (thousands
//     of instructions) it was 75% of the generator's time.
//   - liveness (liveness.go) computes pass.Liveness's sets (the one least
//     fixed point) over basic blocks with a byte of mask bits per register,
//     rather than maps of masks per instruction updated until nothing
//     changes (46% of rendering a package). Compile no longer runs
//     pass.Liveness: Allocate is its only reader.
//   - Compile (compile.go) runs pass.Compile's function passes in its
//     order, each function's whole chain on a worker of its own, so a
//     package's dozens of kernels spread over the cores; all of those
//     passes but Verify and IncludeTextFlagHeader look at one function
//     alone, so the file is the same.
//   - checkVEXRegisters is new: avo allocates X/Y16–31 to AVX2 code that
//     keeps more than 16 vectors live (mmcloughlin/avo#146), which would
//     stop with an illegal instruction on a CPU without AVX-512; Compile
//     refuses such a function.
//
// The package keeps to avo's exported API (ir, pass, reg), so a newer avo
// needs only the equivalence test in package asmgen
// (TestAllocateRegistersIsAvos) to pass again; with it failing, calling
// pass.Compile instead is the fallback.
package regalloc
