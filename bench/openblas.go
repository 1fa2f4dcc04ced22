package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/cpu"
)

// OpenBLAS's core type. Debian's PyTorch multiplies on OpenBLAS, which
// picks its kernels by the CPU's model number: on a CPU it does not know
// (0.3.21 and a new Xeon or EPYC) it falls back to generic SSE3 kernels
// (Core: Prescott) or to AVX2 ones on an AVX-512 CPU, and PyTorch runs
// several times slower than it can. So before a table the PyTorch runner
// asks OpenBLAS which core it chose (OPENBLAS_VERBOSE=2 prints "Core: X")
// and, when the CPU has wider vectors than that core uses, times a float32
// GEMM under each candidate OPENBLAS_CORETYPE (each in a process of its
// own: a core whose instructions the CPU lacks dies of SIGILL) and runs
// every PyTorch figure on the fastest (ChooseOpenBLASCore).

// CoreCandidates are the OPENBLAS_CORETYPE values timed, before the ones
// the CPU cannot run are dropped (CoreRunnable); ZEN only off Intel.
var CoreCandidates = []string{"SKYLAKEX", "COOPERLAKE", "SAPPHIRERAPIDS", "HASWELL", "ZEN"}

// CPUFeatures is what the choice of core type and the bf16 column need to
// know of the CPU.
type CPUFeatures struct {
	Vendor                            string // vendor_id: GenuineIntel, AuthenticAMD; "" if unknown
	AVX2, AVX512, AVX512BF16, AMXBF16 bool   // AVX2+FMA; AVX-512 F/BW/DQ/VL
}

// HostCPU is this machine's CPUFeatures.
func HostCPU() CPUFeatures {
	x := cpu.X86
	return CPUFeatures{
		Vendor:     cpuVendor(),
		AVX2:       x.HasAVX2 && x.HasFMA,
		AVX512:     x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL,
		AVX512BF16: x.HasAVX512BF16,
		AMXBF16:    x.HasAMXBF16,
	}
}

// cpuVendor is /proc/cpuinfo's vendor_id, "" where there is none.
func cpuVendor() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "vendor_id" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// VectorBits is the widest float32 vector the CPU computes on.
func (c CPUFeatures) VectorBits() int {
	switch {
	case c.AVX512:
		return 512
	case c.AVX2:
		return 256
	}
	return 128
}

// BF16 reports whether the CPU has bf16 instructions (AVX512-BF16 or
// AMX-BF16), which PyTorch's bf16 autocast needs to run faster than
// float32; the reason is for a table without the bf16 column.
func (c CPUFeatures) BF16() (ok bool, reason string) {
	if c.AVX512BF16 || c.AMXBF16 {
		return true, ""
	}
	return false, "this CPU has neither AVX512-BF16 nor AMX-BF16 (cpuinfo flags avx512_bf16, amx_bf16)"
}

// CoreVectorBits is the vector width an OpenBLAS core's kernels use, by
// the name OpenBLAS reports ("SkylakeX", "Haswell", "Prescott"); 128 for
// the SSE cores and names it does not know.
func CoreVectorBits(core string) int {
	switch coreKey(core) {
	case "skylakex", "cooperlake", "sapphirerapids":
		return 512
	case "haswell", "zen", "excavator", "steamroller", "piledriver", "bulldozer", "sandybridge":
		return 256
	}
	return 128
}

// CoreRunnable reports whether the CPU has the instructions of candidate
// core (an OPENBLAS_CORETYPE value), and if not which it lacks.
func (c CPUFeatures) CoreRunnable(core string) (ok bool, lacks string) {
	switch coreKey(core) {
	case "haswell", "zen":
		if !c.AVX2 {
			return false, "AVX2/FMA"
		}
	case "skylakex":
		if !c.AVX512 {
			return false, "AVX-512"
		}
	case "cooperlake":
		if !c.AVX512 || !c.AVX512BF16 {
			return false, "AVX512-BF16"
		}
	case "sapphirerapids":
		if !c.AVX512 || !c.AVX512BF16 || !c.AMXBF16 {
			return false, "AMX-BF16"
		}
	}
	return true, ""
}

// coreKey is a core's name as OpenBLAS matches it: lower case, letters
// and digits only.
func coreKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CoreReport is what one probe of OpenBLAS gave: the core it reported,
// whether it rejected the OPENBLAS_CORETYPE asked for, and the probe
// GEMM's speed and error.
type CoreReport struct {
	Core     string  // "SkylakeX", as in OpenBLAS's "Core: SkylakeX"
	NotFound bool    // OpenBLAS said "Core not found: X" (this build lacks X)
	GFLOPS   float64 // float32 GEMM, 1 thread, best of a few
	RelErr   float64 // the GEMM's largest error against a reference, relative to the largest entry
}

// ParseCoreReport reads OpenBLAS's OPENBLAS_VERBOSE=2 lines ("Core: X",
// "Core not found: X") from a probe's stderr; the GEMM figures come from
// its JSON line, separately.
func ParseCoreReport(stderr []byte) (CoreReport, error) {
	var r CoreReport
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "Core not found:"); ok && strings.TrimSpace(v) != "" {
			r.NotFound = true
		} else if v, ok := strings.CutPrefix(line, "Core:"); ok && strings.TrimSpace(v) != "" {
			r.Core = strings.TrimSpace(v)
		}
	}
	if r.Core == "" {
		return r, ErrNoCoreReport
	}
	return r, nil
}

// ErrNoCoreReport is ParseCoreReport's error for output without a
// "Core: X" line: PyTorch's BLAS is not OpenBLAS, or not a DYNAMIC_ARCH
// build, and has no core type to choose.
var ErrNoCoreReport = errors.New(`OpenBLAS printed no "Core: X" line with OPENBLAS_VERBOSE=2 (not OpenBLAS, or not a DYNAMIC_ARCH build)`)

// CoreProbe runs one probe with OPENBLAS_CORETYPE=core ("" leaves the
// choice to OpenBLAS) in a process of its own; an error (the process
// crashed, or printed nothing) means the core is not a candidate. A
// report with Core "" is a BLAS that names no core (ErrNoCoreReport).
type CoreProbe func(ctx context.Context, core string) (CoreReport, error)

// Ways a core type is chosen (OpenBLASChoice.How).
const (
	CoreDetected = "detected" // OpenBLAS's own choice, as wide as the CPU's vectors
	CoreTimed    = "timed"    // the fastest of the candidates
	CoreForced   = "forced"   // -openblas-core NAME
	CoreUnknown  = "unknown"  // the BLAS reports no core type: PyTorch runs as it is
)

// CoreTiming is one candidate's probe: its GFLOP/s, or why it is not a
// candidate.
type CoreTiming struct {
	Name   string // OPENBLAS_CORETYPE value; "" for OpenBLAS's own choice
	Report CoreReport
	Err    error // not a candidate: unknown to the build, lacking instructions, crashed, wrong
}

// OpenBLASChoice is the core type every PyTorch figure runs on and how
// it was chosen.
type OpenBLASChoice struct {
	// Env is the OPENBLAS_CORETYPE value set for PyTorch; "" leaves the
	// choice to OpenBLAS (with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
	// removed from the environment in either case).
	Env      string
	Core     string // the core OpenBLAS reports under Env ("SkylakeX")
	How      string // CoreDetected, CoreTimed or CoreForced
	Detected string // the core OpenBLAS chose by itself; "" if that probe failed
	Timings  []CoreTiming
}

// String is the table header's line: the core, how it was chosen and,
// when timed, every candidate's figure or reason.
func (c OpenBLASChoice) String() string {
	if c.How == CoreUnknown {
		return "a BLAS that reports no OpenBLAS core type (" + ErrNoCoreReport.Error() + "), as it is"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "OpenBLAS core %s", c.Core)
	if c.Env != "" {
		fmt.Fprintf(&b, " (OPENBLAS_CORETYPE=%s)", c.Env)
	}
	switch c.How {
	case CoreDetected:
		fmt.Fprintf(&b, ", detected by OpenBLAS (its vectors are as wide as the CPU's)")
	case CoreForced:
		fmt.Fprintf(&b, ", forced by -openblas-core")
		if c.Detected != "" && coreKey(c.Detected) != coreKey(c.Core) {
			fmt.Fprintf(&b, " (OpenBLAS detects %s)", c.Detected)
		}
	case CoreTimed:
		var parts []string
		for _, t := range c.Timings {
			name := t.Name
			if name == "" {
				name = "detected " + t.Report.Core
				if t.Report.Core == "" {
					name = "detected"
				}
			}
			if t.Err != nil {
				parts = append(parts, fmt.Sprintf("%s: %v", name, t.Err))
			} else {
				parts = append(parts, fmt.Sprintf("%s %.0f", name, t.Report.GFLOPS))
			}
		}
		fmt.Fprintf(&b, ", timed among %s (float32 GEMM GFLOP/s, 1 thread)", strings.Join(parts, ", "))
	}
	return b.String()
}

// CoreGFLOPSFloor is how close to the fastest a probe counts as a tie:
// among candidates within it of each other, the one listed first wins,
// so that timing noise does not flip the choice between equal kernels.
// The detected core is listed first.
const CoreGFLOPSFloor = 0.97

// maxCoreRelErr is the largest relative error a probe GEMM may show: a
// core computing wrong results (as some OpenBLAS builds do on CPUs they
// misdetect) is not a candidate.
const maxCoreRelErr = 1e-3

// ChooseOpenBLASCore chooses the core type for PyTorch's figures on a CPU
// with features c, probing OpenBLAS with probe:
//
//   - force "" or "auto": OpenBLAS's own choice when its vectors are as
//     wide as the CPU's; otherwise the fastest (CoreGFLOPSFloor) of it
//     and CoreCandidates that this build knows, the CPU can run and that
//     compute right, each probed rounds times (best figure kept);
//   - force "time": the same timing whatever OpenBLAS detects;
//   - force NAME: that core, probed once to check this build has it and
//     the CPU runs it.
//
// A BLAS that names no core (not a DYNAMIC_ARCH OpenBLAS) is used as it
// is (CoreUnknown), and cannot be forced.
func ChooseOpenBLASCore(ctx context.Context, c CPUFeatures, probe CoreProbe, force string, rounds int) (OpenBLASChoice, error) {
	force = strings.TrimSpace(force)
	mode := strings.ToLower(force)
	det, detErr := probe(ctx, "")
	var ch OpenBLASChoice
	if detErr == nil {
		ch.Detected = det.Core
	}
	if detErr == nil && det.Core == "" {
		if mode != "" && mode != "auto" && mode != "time" {
			return OpenBLASChoice{}, fmt.Errorf("-openblas-core %s: %w", force, ErrNoCoreReport)
		}
		return OpenBLASChoice{How: CoreUnknown}, nil
	}
	if mode != "" && mode != "auto" && mode != "time" {
		name := strings.ToUpper(force)
		r, err := checkCore(ctx, probe, name)
		if err != nil {
			return OpenBLASChoice{}, fmt.Errorf("-openblas-core %s: %w", force, err)
		}
		ch.Env, ch.Core, ch.How = name, r.Core, CoreForced
		return ch, nil
	}
	if mode != "time" && detErr == nil && CoreVectorBits(det.Core) >= c.VectorBits() && goodGEMM(det) == nil {
		ch.Core, ch.How = det.Core, CoreDetected
		return ch, nil
	}
	// Time the detected core and the candidates, rounds times in turn so
	// that a burst of load on a shared machine hits them alike.
	ch.How = CoreTimed
	ch.Timings = []CoreTiming{{Report: det, Err: detErr}}
	if detErr == nil {
		ch.Timings[0].Err = goodGEMM(det)
	}
	for _, name := range CoreCandidates {
		if name == "ZEN" && c.Vendor == "GenuineIntel" {
			continue
		}
		t := CoreTiming{Name: name}
		if ok, lacks := c.CoreRunnable(name); !ok {
			t.Err = fmt.Errorf("the CPU lacks %s", lacks)
		}
		ch.Timings = append(ch.Timings, t)
	}
	for round := 0; round < max(1, rounds); round++ {
		for i := range ch.Timings {
			t := &ch.Timings[i]
			if t.Err != nil || (round == 0 && t.Name == "") {
				continue // the detected core's first probe is det
			}
			var r CoreReport
			var err error
			if t.Name == "" {
				r, err = probe(ctx, "")
				if err == nil {
					err = goodGEMM(r)
				}
			} else {
				r, err = checkCore(ctx, probe, t.Name)
			}
			if ctx.Err() != nil {
				return OpenBLASChoice{}, ctx.Err()
			}
			if err != nil {
				t.Err = err
				continue
			}
			if r.GFLOPS > t.Report.GFLOPS {
				t.Report = r
			}
		}
	}
	best := -1
	for i, t := range ch.Timings {
		if t.Err == nil && (best < 0 || t.Report.GFLOPS > ch.Timings[best].Report.GFLOPS) {
			best = i
		}
	}
	if best < 0 {
		return OpenBLASChoice{}, fmt.Errorf("no OpenBLAS core type ran the probe GEMM: %s", ch)
	}
	// The first within CoreGFLOPSFloor of the fastest.
	for i, t := range ch.Timings {
		if t.Err == nil && t.Report.GFLOPS >= CoreGFLOPSFloor*ch.Timings[best].Report.GFLOPS {
			best = i
			break
		}
	}
	ch.Env, ch.Core = ch.Timings[best].Name, ch.Timings[best].Report.Core
	return ch, nil
}

// checkCore probes candidate name and checks that OpenBLAS ran it: it
// knows the name (no "Core not found"), reports that core, and the GEMM
// is right.
func checkCore(ctx context.Context, probe CoreProbe, name string) (CoreReport, error) {
	r, err := probe(ctx, name)
	if err != nil {
		return CoreReport{}, err
	}
	if r.NotFound || coreKey(r.Core) != coreKey(name) {
		return CoreReport{}, fmt.Errorf("not in this OpenBLAS build (OpenBLAS did not take the name and ran %s)", r.Core)
	}
	return r, goodGEMM(r)
}

// goodGEMM is nil when the probe's GEMM ran and was right.
func goodGEMM(r CoreReport) error {
	switch {
	case !(r.RelErr <= maxCoreRelErr):
		return fmt.Errorf("wrong GEMM results (relative error %.2g)", r.RelErr)
	case !(r.GFLOPS > 0):
		return fmt.Errorf("probe GEMM at %v GFLOP/s", r.GFLOPS)
	}
	return nil
}
