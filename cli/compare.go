package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/synthgen/synthgen/internal/study"
	"github.com/synthgen/synthgen/internal/textfmt"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/listops"
	"github.com/synthgen/synthgen/specs"
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
		"checkpoint. Ctrl-C keeps the finished runs and saves the current one; -resume continues.\n"+
		"With -task classify (or listops), the specs are classifiers trained on the labelled file -data,\n"+
		"validated on -valid and scored on -test: the table gives test loss and accuracy (listops: beside\n"+
		"Long Range Arena's ListOps column) and accuracy.png the validation accuracy curves. -task listops\n"+
		"without -data first writes ListOps files (synth listops, lengths up to the smallest n of the\n"+
		"specs) into -out/listops.")
	var (
		specList, dataPath, out, task, valid, test  string
		loTrain, loVal, loTest                      int
		steps, batch, seeds, evalEvery, evalWindows int
		workers, logEvery                           int
		seed                                        uint64
		resume                                      bool
	)
	fs.StringVar(&specList, "specs", "", "comma-separated specs to compare: linked spec names, spec files or globs (specs/aft_*.json) (default: every linked spec of spec "+study.DefaultRef+"'s size; with -task classify or listops, of "+study.DefaultClassifyRef+"'s: the bidirectional classifiers)")
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
	fs.StringVar(&task, "task", "lm", "lm (language models on a text), classify (classifiers on labelled files: -data, -valid, -test) or listops (classify on ListOps)")
	fs.StringVar(&valid, "valid", "", "-task classify/listops: the labelled validation `file` (the validation curves)")
	fs.StringVar(&test, "test", "", "-task classify/listops: the labelled test `file` (the table's loss and accuracy)")
	fs.IntVar(&loTrain, "listops-train", 20000, "-task listops without -data: training sequences to generate")
	fs.IntVar(&loVal, "listops-val", 500, "-task listops without -data: validation sequences to generate")
	fs.IntVar(&loTest, "listops-test", 2000, "-task listops without -data: test sequences to generate")
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
	switch task {
	case "lm", "":
		if valid != "" || test != "" {
			return fmt.Errorf("-valid and -test are for -task classify or listops")
		}
	case study.TaskClassify, study.TaskListOps:
		if task == study.TaskListOps && !explicit(fs, "data") && !resume {
			d, v, te, err := writeListOps(e, out, specList, seed, loTrain, loVal, loTest)
			if err != nil {
				return err
			}
			dataPath, valid, test = d, v, te
			opts = append(opts, study.Data(dataPath))
		}
		if !resume && (valid == "" || test == "") {
			return fmt.Errorf("-task %s needs -valid and -test (labelled files)", task)
		}
		if !resume || explicit(fs, "task") {
			opts = append(opts, study.Classify(task, valid, test))
		}
	default:
		return fmt.Errorf("-task %q: must be lm, classify or listops", task)
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
		if res.AccuracyPlot != "" {
			fmt.Fprintf(e.out, "wrote %s, %s, %s, %s and %s\n", res.Markdown, res.CSV, res.JSON, res.LossPlot, res.AccuracyPlot)
		} else {
			fmt.Fprintf(e.out, "wrote %s, %s, %s and %s\n", res.Markdown, res.CSV, res.JSON, res.LossPlot)
		}
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

// writeListOps generates the ListOps files of a -task listops study into
// out/listops: lengths from a quarter of to the smallest n of the specs,
// LRA's depth and arity, from seed. It returns the three files.
func writeListOps(e *env, out, specList string, seed uint64, train, val, test int) (string, string, string, error) {
	var ss []specs.Spec
	var err error
	if specList == "" {
		ss, err = study.DefaultClassifyFamily()
	} else {
		ss, err = study.ResolveSpecs(strings.Split(specList, ","))
	}
	if err != nil {
		return "", "", "", fmt.Errorf("-specs: %w", err)
	}
	n := ss[0].N
	for _, s := range ss {
		n = min(n, s.N)
	}
	o := listops.Options{MinLen: max(1, n/4), MaxLen: n}
	if err := o.Check(); err != nil {
		return "", "", "", fmt.Errorf("-task listops at n %d: %w", n, err)
	}
	dir := filepath.Join(out, "listops")
	c := listops.Counts{Train: train, Val: val, Test: test}
	if c.Train < 1 || c.Val < 1 || c.Test < 1 {
		return "", "", "", fmt.Errorf("-listops-train, -listops-val and -listops-test must be ≥ 1")
	}
	if err := listops.CheckFiles(dir, c, data.FormatTSV, false); err != nil {
		return "", "", "", err
	}
	fmt.Fprintf(e.out, "listops: seed %d, lengths %d…%d, %d/%d/%d sequences (train/val/test) into %s\n", seed, o.MinLen, o.MaxLen, train, val, test, dir)
	sp, err := listops.Generate(seed, o, c)
	if err != nil {
		return "", "", "", err
	}
	if _, err := listops.WriteFiles(dir, sp, data.FormatTSV, false); err != nil {
		return "", "", "", err
	}
	p := func(split string) string { return filepath.Join(dir, listops.FileName(split, data.FormatTSV)) }
	return p("train"), p("val"), p("test"), nil
}
