package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseCoreReport(t *testing.T) {
	// OPENBLAS_VERBOSE=2 on OpenBLAS 0.3.21 (stderr), as it prints it.
	r, err := ParseCoreReport([]byte("Core not found: SAPPHIRERAPIDS\nCore: Cooperlake\n"))
	if err != nil || r.Core != "Cooperlake" || !r.NotFound {
		t.Errorf("unknown core type: %+v, %v; want Cooperlake, not found", r, err)
	}
	r, err = ParseCoreReport([]byte("some warning\nCore: Prescott\n"))
	if err != nil || r.Core != "Prescott" || r.NotFound {
		t.Errorf("detected: %+v, %v; want Prescott", r, err)
	}
	if _, err := ParseCoreReport([]byte("Traceback …\nImportError: no torch\n")); !errors.Is(err, ErrNoCoreReport) {
		t.Errorf("output without a Core line: %v, want ErrNoCoreReport", err)
	}
}

func TestCoreVectorBits(t *testing.T) {
	for core, want := range map[string]int{"Prescott": 128, "Core2": 128, "Sandybridge": 256, "Haswell": 256, "Zen": 256,
		"SkylakeX": 512, "COOPERLAKE": 512, "SapphireRapids": 512, "Opteron(SSE3)": 128} {
		if got := CoreVectorBits(core); got != want {
			t.Errorf("CoreVectorBits(%q) = %d, want %d", core, got, want)
		}
	}
}

// fakeOpenBLAS is a CoreProbe over a table: what each OPENBLAS_CORETYPE
// value ("" for none) makes OpenBLAS report, its GFLOP/s per call in
// turn, or a crash. It counts the calls.
type fakeOpenBLAS struct {
	reports map[string]CoreReport
	rates   map[string][]float64
	crash   map[string]bool
	calls   map[string]int
}

func (f *fakeOpenBLAS) probe(_ context.Context, core string) (CoreReport, error) {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	n := f.calls[core]
	f.calls[core]++
	if f.crash[core] {
		return CoreReport{}, errors.New("probe crashed: signal: illegal instruction")
	}
	r, ok := f.reports[core]
	if !ok {
		// As OpenBLAS does with a name it lacks: say so, run the default.
		r = f.reports[""]
		r.NotFound = true
	}
	if rates := f.rates[core]; len(rates) > 0 {
		r.GFLOPS = rates[min(n, len(rates)-1)]
	}
	return r, nil
}

var (
	avx512CPU = CPUFeatures{Vendor: "AuthenticAMD", AVX2: true, AVX512: true, AVX512BF16: true}
	amxCPU    = CPUFeatures{Vendor: "GenuineIntel", AVX2: true, AVX512: true, AVX512BF16: true, AMXBF16: true}
)

func TestChooseOpenBLASCoreTimed(t *testing.T) {
	// An AVX-512 CPU where OpenBLAS runs Prescott by itself: every
	// candidate is timed twice (the best kept); SAPPHIRERAPIDS is not in
	// the build (OpenBLAS runs its default instead), ZEN crashes, HASWELL
	// computes wrong results; COOPERLAKE is fastest in its second round.
	f := &fakeOpenBLAS{
		reports: map[string]CoreReport{
			"":           {Core: "Prescott"},
			"SKYLAKEX":   {Core: "SkylakeX"},
			"COOPERLAKE": {Core: "Cooperlake"},
			"HASWELL":    {Core: "Haswell", RelErr: 0.5},
			"ZEN":        {Core: "Zen"},
		},
		rates: map[string][]float64{"": {40, 41}, "SKYLAKEX": {150, 140}, "COOPERLAKE": {120, 160}, "HASWELL": {300, 300}, "ZEN": {500}},
		crash: map[string]bool{"ZEN": true},
	}
	ch, err := ChooseOpenBLASCore(context.Background(), avx512CPU, f.probe, "auto", 2)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Env != "COOPERLAKE" || ch.Core != "Cooperlake" || ch.How != CoreTimed || ch.Detected != "Prescott" {
		t.Fatalf("choice %+v; want COOPERLAKE, timed, Prescott detected", ch)
	}
	for core, want := range map[string]int{"": 2, "SKYLAKEX": 2, "COOPERLAKE": 2, "SAPPHIRERAPIDS": 0, "ZEN": 1} {
		if f.calls[core] != want {
			t.Errorf("%q probed %d times, want %d (SAPPHIRERAPIDS needs AMX, which the CPU lacks)", core, f.calls[core], want)
		}
	}
	var failed []string
	for _, tm := range ch.Timings {
		if tm.Err != nil {
			failed = append(failed, tm.Name)
		}
	}
	if !slices.Equal(failed, []string{"SAPPHIRERAPIDS", "HASWELL", "ZEN"}) {
		t.Errorf("candidates left out: %v; want SAPPHIRERAPIDS (CPU lacks AMX), HASWELL (wrong), ZEN (crashed)", failed)
	}
	s := ch.String()
	for _, want := range []string{"OpenBLAS core Cooperlake (OPENBLAS_CORETYPE=COOPERLAKE)", "timed among detected Prescott 41", "COOPERLAKE 160", "ZEN: probe crashed", "HASWELL: wrong GEMM results"} {
		if !strings.Contains(s, want) {
			t.Errorf("header %q lacks %q", s, want)
		}
	}

	// On an AMX CPU, SAPPHIRERAPIDS is probed; the build lacks it, so it
	// is left out, not taken for the core OpenBLAS ran in its place.
	// Intel: no ZEN. SKYLAKEX and COOPERLAKE within CoreGFLOPSFloor: the
	// one listed first wins.
	f = &fakeOpenBLAS{
		// OpenBLAS 0.3.21 on a Xeon: "Core not found: X", then it runs
		// a core of that name all the same; not a candidate either.
		reports: map[string]CoreReport{"": {Core: "Haswell"}, "SKYLAKEX": {Core: "SkylakeX"}, "COOPERLAKE": {Core: "Cooperlake"}, "HASWELL": {Core: "Haswell"},
			"SAPPHIRERAPIDS": {Core: "SapphireRapids", NotFound: true}},
		rates: map[string][]float64{"": {100}, "SKYLAKEX": {150}, "COOPERLAKE": {152}, "HASWELL": {101}, "SAPPHIRERAPIDS": {999}},
	}
	ch, err = ChooseOpenBLASCore(context.Background(), amxCPU, f.probe, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Env != "SKYLAKEX" || ch.How != CoreTimed || f.calls["ZEN"] != 0 || f.calls["SAPPHIRERAPIDS"] != 1 {
		t.Errorf("choice %+v, probes %v; want SKYLAKEX (first within the floor), ZEN not probed on Intel", ch, f.calls)
	}

	// Nothing runs: an error naming every candidate's reason.
	f = &fakeOpenBLAS{crash: map[string]bool{"": true, "SKYLAKEX": true, "COOPERLAKE": true, "SAPPHIRERAPIDS": true, "HASWELL": true, "ZEN": true}}
	if _, err := ChooseOpenBLASCore(context.Background(), amxCPU, f.probe, "", 1); err == nil || !strings.Contains(err.Error(), "SKYLAKEX: probe crashed") {
		t.Errorf("all crashing: %v", err)
	}
}

func TestChooseOpenBLASCoreDetected(t *testing.T) {
	// OpenBLAS's own core is as wide as the CPU's vectors: it is kept
	// without timing the others.
	f := &fakeOpenBLAS{reports: map[string]CoreReport{"": {Core: "SkylakeX"}}, rates: map[string][]float64{"": {140}}}
	ch, err := ChooseOpenBLASCore(context.Background(), amxCPU, f.probe, "auto", 2)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Env != "" || ch.Core != "SkylakeX" || ch.How != CoreDetected || len(f.calls) != 1 {
		t.Errorf("choice %+v, probes %v; want SkylakeX detected, one probe", ch, f.calls)
	}
	if s := ch.String(); !strings.Contains(s, "OpenBLAS core SkylakeX, detected") {
		t.Errorf("header %q", s)
	}
	// An AVX2 CPU with OpenBLAS on Haswell: detected too.
	f = &fakeOpenBLAS{reports: map[string]CoreReport{"": {Core: "Haswell"}}, rates: map[string][]float64{"": {60}}}
	if ch, err := ChooseOpenBLASCore(context.Background(), CPUFeatures{AVX2: true}, f.probe, "", 2); err != nil || ch.How != CoreDetected {
		t.Errorf("AVX2 CPU on Haswell: %+v, %v", ch, err)
	}
	// A BLAS that names no core: used as it is, and cannot be forced.
	f = &fakeOpenBLAS{reports: map[string]CoreReport{"": {}}, rates: map[string][]float64{"": {60}}}
	if ch, err := ChooseOpenBLASCore(context.Background(), amxCPU, f.probe, "auto", 2); err != nil || ch.How != CoreUnknown || ch.Env != "" || len(f.calls) != 1 {
		t.Errorf("no core report: %+v, %v, probes %v; want it used as it is", ch, err, f.calls)
	}
	if _, err := ChooseOpenBLASCore(context.Background(), amxCPU, f.probe, "SKYLAKEX", 2); !errors.Is(err, ErrNoCoreReport) {
		t.Errorf("forcing a core on a BLAS that names none: %v", err)
	}
	// "time" times them all the same.
	f = &fakeOpenBLAS{
		reports: map[string]CoreReport{"": {Core: "SkylakeX"}, "SKYLAKEX": {Core: "SkylakeX"}, "COOPERLAKE": {Core: "Cooperlake"}, "SAPPHIRERAPIDS": {Core: "SapphireRapids"}, "HASWELL": {Core: "Haswell"}},
		rates:   map[string][]float64{"": {100}, "SKYLAKEX": {100}, "COOPERLAKE": {100}, "SAPPHIRERAPIDS": {200}, "HASWELL": {50}},
	}
	ch, err = ChooseOpenBLASCore(context.Background(), amxCPU, f.probe, "time", 1)
	if err != nil || ch.Env != "SAPPHIRERAPIDS" || ch.How != CoreTimed {
		t.Errorf("time: %+v, %v; want SAPPHIRERAPIDS timed", ch, err)
	}
}

func TestChooseOpenBLASCoreForced(t *testing.T) {
	reports := map[string]CoreReport{"": {Core: "Prescott"}, "HASWELL": {Core: "Haswell"}, "SKYLAKEX": {Core: "SkylakeX"}}
	rates := map[string][]float64{"": {40}, "HASWELL": {100}, "SKYLAKEX": {150}}
	// Forced: that core, even where another is faster, and no timing.
	f := &fakeOpenBLAS{reports: reports, rates: rates}
	ch, err := ChooseOpenBLASCore(context.Background(), avx512CPU, f.probe, "haswell", 2)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Env != "HASWELL" || ch.Core != "Haswell" || ch.How != CoreForced || f.calls["SKYLAKEX"] != 0 {
		t.Errorf("forced: %+v, probes %v; want HASWELL, forced, nothing timed", ch, f.calls)
	}
	if s := ch.String(); !strings.Contains(s, "forced by -openblas-core (OpenBLAS detects Prescott)") {
		t.Errorf("header %q", s)
	}
	// A name the build lacks, and one that crashes, are errors.
	f = &fakeOpenBLAS{reports: reports, rates: rates}
	if _, err := ChooseOpenBLASCore(context.Background(), avx512CPU, f.probe, "BOGUS", 1); err == nil || !strings.Contains(err.Error(), "-openblas-core BOGUS: not in this OpenBLAS build") {
		t.Errorf("unknown forced core: %v", err)
	}
	f = &fakeOpenBLAS{reports: reports, rates: rates, crash: map[string]bool{"SKYLAKEX": true}}
	if _, err := ChooseOpenBLASCore(context.Background(), avx512CPU, f.probe, "SKYLAKEX", 1); err == nil || !strings.Contains(err.Error(), "crashed") {
		t.Errorf("crashing forced core: %v", err)
	}
}

// TestProbeCoreProcess runs the real ProbeCore on a fake bench.py (a
// shell script) that acts as OpenBLAS would: it reports the core of
// OPENBLAS_CORETYPE, dies of SIGILL under SAPPHIRERAPIDS, and fails if
// the environment's OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE reach it.
func TestProbeCoreProcess(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	t.Setenv("OPENBLAS_CORETYPE", "HASWELL")
	t.Setenv("OPENBLAS_L2_SIZE", "1048576")
	script := `#!/bin/sh
[ "$1" = --probe-gemm ] || { echo "bad args $*" >&2; exit 2; }
[ -z "$OPENBLAS_L2_SIZE" ] || { echo "OPENBLAS_L2_SIZE leaked" >&2; exit 4; }
[ "$OPENBLAS_VERBOSE" = 2 ] && [ "$OMP_NUM_THREADS" = 1 ] || { echo "want OPENBLAS_VERBOSE=2, 1 thread" >&2; exit 5; }
case "$OPENBLAS_CORETYPE" in
"") echo "Core: Prescott" >&2; g=40 ;;
SKYLAKEX) echo "Core: SkylakeX" >&2; g=150 ;;
COOPERLAKE) echo "Core: Cooperlake" >&2; g=170 ;;
HASWELL) echo "Core: Haswell" >&2; g=100 ;;
SAPPHIRERAPIDS) kill -ILL $$ ;;
*) echo "Core not found: $OPENBLAS_CORETYPE" >&2; echo "Core: Prescott" >&2; g=40 ;;
esac
echo "{\"gflops\": $g, \"rel_err\": 1e-7}"
`
	path := filepath.Join(t.TempDir(), "bench.py")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := &PyTorch{Python: "/bin/sh", Script: path}
	r, err := p.ProbeCore(context.Background(), "")
	if err != nil || r.Core != "Prescott" || r.GFLOPS != 40 {
		t.Fatalf("OpenBLAS's own choice: %+v, %v; want Prescott at 40 (the environment's OPENBLAS_CORETYPE not passed on)", r, err)
	}
	if _, err := p.ProbeCore(context.Background(), "SAPPHIRERAPIDS"); err == nil || !strings.Contains(err.Error(), "illegal instruction") {
		t.Errorf("SIGILL: %v", err)
	}
	ch, err := ChooseOpenBLASCore(context.Background(), amxCPU, p.ProbeCore, "auto", 1)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Env != "COOPERLAKE" || ch.Core != "Cooperlake" || ch.How != CoreTimed {
		t.Errorf("choice %+v; want COOPERLAKE timed", ch)
	}
	if s := ch.String(); !strings.Contains(s, "SAPPHIRERAPIDS: probe crashed") {
		t.Errorf("header %q does not say SAPPHIRERAPIDS crashed", s)
	}
}
