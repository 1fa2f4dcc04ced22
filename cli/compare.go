package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/synthgen/synthgen/internal/study"
	"github.com/synthgen/synthgen/internal/textfmt"
)

// defaultStudyDir is synth compare's output folder without -out.
const defaultStudyDir = "study"

func runCompare(e *env, args []string) error {
	ctx, stop := interruptContext(e.errOut)
	defer stop()
	e.ctx = ctx
	return compareCmd(e, args)
}

func compareCmd(e *env, args []string) error {
	fs := newFlagSet(e, "compare", "Trains a list of specs (default: the n128 d128 h4 L4 family, 14 variants) on the same data,\n"+
		"seeds, steps and held-out windows, one after another with all workers, and writes into -out:\n"+
		"results.md/.csv/.json (the table, also printed), loss.png (the loss curves) and every run's\n"+
		"checkpoint. Ctrl-C keeps the finished runs and saves the current one; -resume continues.")
	var (
		specList, dataPath, out                     string
		steps, batch, seeds, evalEvery, evalWindows int
		workers, logEvery                           int
		seed                                        uint64
		resume                                      bool
	)
	fs.StringVar(&specList, "specs", "", "comma-separated specs to compare: linked spec names, spec files or globs (specs/aft_*.json) (default: every linked spec of spec "+study.DefaultRef+"'s size)")
	fs.StringVar(&dataPath, "data", "", "training text, read as bytes; the last 10% is held out (default: Go's Isaac.Newton-Opticks.txt)")
	fs.IntVar(&steps, "steps", study.DefaultSteps, "training steps of every run")
	fs.IntVar(&batch, "batch", study.DefaultBatch, "sequences of n tokens per step")
	fs.IntVar(&seeds, "seeds", study.DefaultSeeds, "runs per spec, with seeds -seed, -seed+1, …: the table gives mean ± std")
	fs.Uint64Var(&seed, "seed", study.DefaultSeed, "first seed (initialisation and batches)")
	fs.IntVar(&evalEvery, "eval-every", study.DefaultEvalEvery, "validation-curve evaluation every this many steps (0: none)")
	fs.IntVar(&evalWindows, "eval-windows", study.DefaultEvalWindows, "held-out windows per curve evaluation (0: all); the table's val loss uses all of them")
	fs.IntVar(&workers, "workers", 0, "goroutine workers of each run (0: GOMAXPROCS); results do not depend on it")
	fs.StringVar(&out, "out", defaultStudyDir, "output `folder` (created if missing; must not hold an earlier study unless -resume)")
	fs.BoolVar(&resume, "resume", false, "continue the study in -out: finished runs are kept, an interrupted one continues from its checkpoint (settings come from the study; flags given must agree)")
	fs.IntVar(&logEvery, "log-every", 50, "print a progress line every this many steps (and at each evaluation) when output is not a terminal")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if logEvery < 1 {
		return fmt.Errorf("-log-every %d must be ≥ 1", logEvery)
	}
	p := &studyProgress{liveLine{e: e, logEvery: logEvery}}
	opts := []study.Option{study.Workers(workers), study.OnProgress(p.event)}
	var err error
	// Only the flags given explicitly become options: a resumed study
	// takes its saved settings and checks the ones given against them.
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "specs":
			ss, serr := study.ResolveSpecs(strings.Split(specList, ","))
			if serr != nil {
				err = fmt.Errorf("-specs: %w", serr)
			}
			opts = append(opts, study.Specs(ss...))
		case "data":
			opts = append(opts, study.Data(dataPath))
		case "steps":
			opts = append(opts, study.Steps(steps))
		case "batch":
			opts = append(opts, study.Batch(batch))
		case "seeds":
			opts = append(opts, study.Seeds(seeds))
		case "seed":
			opts = append(opts, study.Seed(seed))
		case "eval-every":
			opts = append(opts, study.EvalEvery(evalEvery))
		case "eval-windows":
			opts = append(opts, study.EvalWindows(evalWindows))
		}
	})
	if err != nil {
		return err
	}
	var st *study.Study
	if resume {
		st, err = study.Open(out, opts...)
	} else {
		st, err = study.New(out, opts...)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(e.out, st.Plan())
	start := time.Now()
	res, err := st.Run(e.context())
	p.finish()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if res != nil && len(res.Table.Rows) > 0 {
		fmt.Fprintln(e.out)
		fmt.Fprint(e.out, res.Table.Markdown())
		fmt.Fprintln(e.out)
		fmt.Fprintf(e.out, "wrote %s, %s, %s and %s\n", res.Markdown, res.CSV, res.JSON, res.LossPlot)
	}
	if err != nil { // cancelled
		fmt.Fprintf(e.out, "%v\n", err)
		fmt.Fprintf(e.out, "finished runs and a resumable checkpoint are in %s; continue with: synth compare -resume -out %s\n", out, out)
		return nil
	}
	fmt.Fprintf(e.out, "study done in %s\n", textfmt.Duration(time.Since(start)))
	return nil
}

// studyProgress prints a study's progress; run starts and ends always
// get a line.
type studyProgress struct{ liveLine }

func (p *studyProgress) event(pr study.Progress) {
	if pr.Kind != study.RunStep {
		p.println("%s", pr)
		return
	}
	p.step(pr.Event.Step, pr, pr.Event.Evaluated)
}
