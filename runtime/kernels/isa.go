package kernels

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/cpu"
)

// ISA is an instruction-set level a kernel is written for.
type ISA int

// The levels, lowest first. Dispatch prefers the highest one the CPU has.
const (
	Go     ISA = iota // unrolled pure Go: runs everywhere
	AVX2              // AVX2 + FMA on YMM registers
	AVX512            // AVX-512 F/BW/DQ/VL on ZMM registers with K-mask tails
)

// Levels lists every level, lowest first.
func Levels() []ISA { return []ISA{Go, AVX2, AVX512} }

func (i ISA) String() string {
	switch i {
	case Go:
		return "go"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	}
	return fmt.Sprintf("ISA(%d)", int(i))
}

// ParseISA reads a level as SYNTHGEN_ISA spells it: go (or generic), avx2,
// avx512; String gives the first of these names.
func ParseISA(s string) (ISA, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "generic", "go", "purego":
		return Go, nil
	case "avx2":
		return AVX2, nil
	case "avx512":
		return AVX512, nil
	}
	return 0, fmt.Errorf("unknown instruction set %q (want go, avx2 or avx512; generic and purego mean go)", s)
}

// features lists the CPU features each level's generated assembly uses.
var features = map[ISA][]string{
	Go:     nil,
	AVX2:   {"CMOV", "SSE", "SSE2", "MMX+", "AVX", "AVX2", "FMA3"},
	AVX512: {"CMOV", "SSE", "SSE2", "MMX+", "AVX", "AVX2", "FMA3", "AVX512F", "AVX512BW", "AVX512DQ", "AVX512VL", "BMI2"},
}

// Features lists the CPU features the level's generated assembly uses (a
// new slice; none for Go). The generator's tests check that every
// "Requires:" line of the emitted assembly is covered by this list.
func (i ISA) Features() []string { return append([]string(nil), features[i]...) }

// missing returns the features of level l that this CPU lacks.
func missing(l ISA) []string {
	have := map[string]bool{
		"CMOV":     true, // CMOV, SSE, SSE2 and SSE's MMX extensions (the
		"SSE":      true, // prefetches: avo's "MMX+") are part of every
		"SSE2":     true, // amd64 CPU
		"MMX+":     true,
		"AVX":      cpu.X86.HasAVX,
		"AVX2":     cpu.X86.HasAVX2,
		"FMA3":     cpu.X86.HasFMA,
		"BMI2":     cpu.X86.HasBMI2,
		"AVX512F":  cpu.X86.HasAVX512F,
		"AVX512BW": cpu.X86.HasAVX512BW,
		"AVX512DQ": cpu.X86.HasAVX512DQ,
		"AVX512VL": cpu.X86.HasAVX512VL,
	}
	var out []string
	for _, f := range features[l] {
		if !have[f] {
			out = append(out, f)
		}
	}
	return out
}

// Supported reports whether this CPU can run level l's kernels.
func Supported(l ISA) bool { return len(missing(l)) == 0 }

// Best returns the highest level this CPU supports.
func Best() ISA {
	levels := Levels()
	for i := len(levels) - 1; i >= 0; i-- {
		if Supported(levels[i]) {
			return levels[i]
		}
	}
	return Go
}

// EnvISA is the environment variable that caps the level kernels run at.
const EnvISA = "SYNTHGEN_ISA"

// Level returns the level dispatch uses: the CPU's best, or the one
// SYNTHGEN_ISA asks for. Asking for a level the CPU lacks is an error that
// names the missing features.
func Level() (ISA, error) {
	v, ok := os.LookupEnv(EnvISA)
	if !ok || strings.TrimSpace(v) == "" {
		return Best(), nil
	}
	l, err := ParseISA(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", EnvISA, err)
	}
	if m := missing(l); len(m) > 0 {
		return 0, fmt.Errorf("%s=%s: this CPU lacks %s", EnvISA, v, strings.Join(m, ", "))
	}
	return l, nil
}
