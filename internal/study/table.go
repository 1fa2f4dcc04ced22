package study

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/synthgen/synthgen/internal/plots"
	"github.com/synthgen/synthgen/internal/textfmt"
)

// Row is one spec's line of the table: its runs' losses, their mean and
// sample standard deviation over the seeds (0 for one seed).
type Row struct {
	Spec         string  `json:"spec"`
	Variant      string  `json:"variant"`
	Params       int     `json:"params"`
	Runs         int     `json:"runs"` // finished seeds
	TrainLoss    float64 `json:"train_loss"`
	TrainLossStd float64 `json:"train_loss_std"`
	ValLoss      float64 `json:"val_loss"`
	ValLossStd   float64 `json:"val_loss_std"`
	BPB          float64 `json:"bpb"`
	BPBStd       float64 `json:"bpb_std"`
	ValWindows   int     `json:"val_windows"`
	// A classification study's: the test accuracy (mean and standard
	// deviation over the seeds) and the test examples; ValLoss is then
	// the test loss.
	Accuracy    float64 `json:"accuracy,omitempty"`
	AccuracyStd float64 `json:"accuracy_std,omitempty"`
	Examples    int     `json:"examples,omitempty"`
	// Measured, not reproducible: the mean training throughput over the
	// runs, and their total wall time.
	TokensPerSec float64 `json:"tokens_per_s"`
	WallSeconds  float64 `json:"wall_seconds"`
}

// Table is a study's results: one row per spec with a finished run, in
// the study's order, and every finished run.
type Table struct {
	Settings Settings    `json:"settings"`
	Rows     []Row       `json:"rows"`
	Runs     []RunResult `json:"runs"`
}

// table builds the table of the finished runs.
func (st *Study) table() *Table {
	t := &Table{Settings: st.o.s, Runs: []RunResult{}, Rows: []Row{}}
	for _, sp := range st.o.s.Specs {
		var rs []RunResult
		for _, r := range st.state.Runs {
			if r.Spec == sp.Name && r.Result != nil {
				rs = append(rs, *r.Result)
			}
		}
		if len(rs) == 0 {
			continue
		}
		t.Runs = append(t.Runs, rs...)
		row := Row{Spec: sp.Name, Variant: sp.Variant, Params: rs[0].Params, Runs: len(rs), ValWindows: rs[0].ValWindows}
		pick := func(f func(RunResult) float64) (mean, std float64) {
			for _, r := range rs {
				mean += f(r)
			}
			mean /= float64(len(rs))
			if len(rs) > 1 {
				for _, r := range rs {
					d := f(r) - mean
					std += d * d
				}
				std = math.Sqrt(std / float64(len(rs)-1))
			}
			return mean, std
		}
		row.TrainLoss, row.TrainLossStd = pick(func(r RunResult) float64 { return r.TrainLoss })
		row.ValLoss, row.ValLossStd = pick(func(r RunResult) float64 { return r.ValLoss })
		row.BPB, row.BPBStd = pick(func(r RunResult) float64 { return r.BPB })
		if st.o.s.isClassify() {
			row.Accuracy, row.AccuracyStd = pick(func(r RunResult) float64 { return r.Accuracy })
			row.Examples = rs[0].Examples
		}
		row.TokensPerSec, _ = pick(func(r RunResult) float64 { return r.TokensPerSec })
		for _, r := range rs {
			row.WallSeconds += r.WallSeconds
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// Markdown is the table in Markdown, with a line saying what the columns
// are.
func (t *Table) Markdown() string {
	if t.Settings.isClassify() {
		return t.classMarkdown()
	}
	var b strings.Builder
	seeds := t.Settings.Seeds
	pm := func(mean, std float64, runs int) string {
		if seeds > 1 && runs > 1 {
			return fmt.Sprintf("%.4f ± %.4f", mean, std)
		}
		return fmt.Sprintf("%.4f", mean)
	}
	b.WriteString("| spec | variant | params | train loss | val loss | bits/byte | tokens/s | wall time |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	windows := -1
	for _, r := range t.Rows {
		name := r.Spec
		if r.Runs < seeds {
			name += fmt.Sprintf(" (%d/%d seeds)", r.Runs, seeds)
		}
		if windows == -1 || windows == r.ValWindows {
			windows = r.ValWindows
		} else {
			windows = 0 // they differ: n differs
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, r.Variant, textfmt.Count(float64(r.Params)),
			pm(r.TrainLoss, r.TrainLossStd, r.Runs), pm(r.ValLoss, r.ValLossStd, r.Runs), pm(r.BPB, r.BPBStd, r.Runs),
			textfmt.Count(r.TokensPerSec), textfmt.Duration(time.Duration(r.WallSeconds*float64(time.Second))))
	}
	s := t.Settings
	fmt.Fprintf(&b, "\n%d steps × batch %d", s.Steps, s.Batch)
	if seeds > 1 {
		fmt.Fprintf(&b, ", mean ± std over seeds %d…%d", s.Seed, s.Seed+uint64(seeds)-1)
	} else {
		fmt.Fprintf(&b, ", seed %d", s.Seed)
	}
	fmt.Fprintf(&b, ". Losses in nats per byte: train loss is the mean batch loss of the last %d steps, val loss is on all %s held-out windows. tokens/s (training steps only) and wall time (the whole run, evaluations included", min(TrainTail, s.Steps), windowCount(windows))
	if seeds > 1 {
		b.WriteString(", summed over the seeds")
	}
	b.WriteString(") are measured and vary between runs.\n")
	return b.String()
}

// CSVHeader is the first line of results.csv.
const CSVHeader = "spec,variant,params,runs,train_loss,train_loss_std,val_loss,val_loss_std,bpb,bpb_std,val_windows,tokens_per_s,wall_s"

// WriteCSV writes the table as CSV with the header CSVHeader (a
// classification study's: ClassCSVHeader); the last
// two columns are measured, the others reproducible.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }
	if t.Settings.isClassify() {
		cw.Write(strings.Split(ClassCSVHeader, ","))
		for _, r := range t.Rows {
			cw.Write([]string{r.Spec, r.Variant, strconv.Itoa(r.Params), strconv.Itoa(r.Runs),
				f(r.TrainLoss), f(r.TrainLossStd), f(r.ValLoss), f(r.ValLossStd), f(r.Accuracy), f(r.AccuracyStd),
				strconv.Itoa(r.Examples), strconv.FormatFloat(r.TokensPerSec, 'f', 0, 64), strconv.FormatFloat(r.WallSeconds, 'f', 1, 64)})
		}
		cw.Flush()
		return cw.Error()
	}
	cw.Write(strings.Split(CSVHeader, ","))
	for _, r := range t.Rows {
		cw.Write([]string{r.Spec, r.Variant, strconv.Itoa(r.Params), strconv.Itoa(r.Runs),
			f(r.TrainLoss), f(r.TrainLossStd), f(r.ValLoss), f(r.ValLossStd), f(r.BPB), f(r.BPBStd),
			strconv.Itoa(r.ValWindows), strconv.FormatFloat(r.TokensPerSec, 'f', 0, 64), strconv.FormatFloat(r.WallSeconds, 'f', 1, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// writeResults writes the table of the finished runs (Markdown, CSV,
// JSON), loss.png and, for a classification study whose logs have
// validation accuracies (EvalEvery > 0), accuracy.png.
func (st *Study) writeResults() (*Result, error) {
	t := st.table()
	res := &Result{Table: t, Markdown: st.path(MarkdownFile), CSV: st.path(CSVFile), JSON: st.path(JSONFile), Complete: true}
	for _, r := range st.state.Runs {
		res.Complete = res.Complete && r.Result != nil
	}
	if err := writeAtomic(res.Markdown, []byte(t.Markdown())); err != nil {
		return nil, err
	}
	var cb bytes.Buffer
	if err := t.WriteCSV(&cb); err != nil {
		return nil, fmt.Errorf("write %s: %w", res.CSV, err)
	}
	if err := writeAtomic(res.CSV, cb.Bytes()); err != nil {
		return nil, err
	}
	jb, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", res.JSON, err)
	}
	if err := writeAtomic(res.JSON, append(jb, '\n')); err != nil {
		return nil, err
	}
	s := st.o.s
	if len(t.Rows) == 0 {
		return res, nil
	}
	series, err := st.curves()
	if err != nil {
		return nil, err
	}
	res.LossPlot = st.path(LossPlotFile)
	opt := plots.LossOptions{
		Title:      fmt.Sprintf("%d specs, %d steps × batch %d (%s)", len(series), s.Steps, s.Batch, seedText(s)),
		TrainTitle: "training loss (per step)",
		ValTitle:   fmt.Sprintf("validation loss (%s held-out windows)", windowText(s.EvalWindows)),
	}
	if s.isClassify() {
		opt.ValTitle = fmt.Sprintf("validation loss (%s)", filepath.Base(s.Valid))
		opt.YLabel = "loss (nats per example)"
	}
	if w := smoothing(s.Steps); w > 1 {
		opt.TrainTitle = fmt.Sprintf("training loss (running mean of %d steps)", w)
	}
	if err := plots.WriteFile(res.LossPlot, func(w io.Writer) error { return plots.Loss(w, series, opt) }); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(series, func(x plots.Series) bool { return len(x.Acc) > 0 }) {
		res.AccuracyPlot = st.path(AccuracyPlotFile)
		aopt := plots.AccuracyOptions{
			Title:       fmt.Sprintf("validation accuracy (%s), %d steps × batch %d (%s)", filepath.Base(s.Valid), s.Steps, s.Batch, seedText(s)),
			Chance:      1 / float64(s.Specs[0].Classes),
			ChanceLabel: fmt.Sprintf("1/%d classes", s.Specs[0].Classes),
		}
		if err := plots.WriteFile(res.AccuracyPlot, func(w io.Writer) error { return plots.Accuracy(w, series, aopt) }); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func seedText(s Settings) string {
	if s.Seeds > 1 {
		return fmt.Sprintf("seeds %d…%d", s.Seed, s.Seed+uint64(s.Seeds)-1)
	}
	return fmt.Sprintf("seed %d", s.Seed)
}

func windowText(n int) string {
	if n == 0 {
		return "all"
	}
	return strconv.Itoa(n)
}

// smoothing is the running-mean window of the plotted training loss.
func smoothing(steps int) int { return max(1, steps/40) }

// curves reads the finished runs' logs: per spec, the training loss
// (running mean), the validation loss and (a classifier's) validation
// accuracy, averaged over its finished seeds.
func (st *Study) curves() ([]plots.Series, error) {
	s := st.o.s
	var out []plots.Series
	for _, sp := range s.Specs {
		var logs []*runLog
		for _, r := range st.state.Runs {
			if r.Spec != sp.Name || r.Result == nil {
				continue
			}
			l, err := readLog(runCSV(st.path(r.Checkpoint)), s.Steps)
			if err != nil {
				return nil, err
			}
			logs = append(logs, l)
		}
		if len(logs) == 0 {
			continue
		}
		ser := plots.Series{Name: sp.Name}
		train := mean(logs, func(l *runLog) []logPoint { return l.train })
		win := smoothing(s.Steps)
		acc := 0.0
		for i, p := range train {
			acc += p.loss
			if i >= win {
				acc -= train[i-win].loss
			}
			if i >= win-1 {
				ser.Train = append(ser.Train, plots.Point{X: float64(p.step), Y: acc / float64(win)})
			}
		}
		for _, p := range mean(logs, func(l *runLog) []logPoint { return l.val }) {
			ser.Val = append(ser.Val, plots.Point{X: float64(p.step), Y: p.loss})
		}
		for _, p := range mean(logs, func(l *runLog) []logPoint { return l.acc }) {
			ser.Acc = append(ser.Acc, plots.Point{X: float64(p.step), Y: p.loss})
		}
		out = append(out, ser)
	}
	return out, nil
}

// mean averages the points of the logs over the steps all of them have.
func mean(logs []*runLog, pick func(*runLog) []logPoint) []logPoint {
	sum := map[int]float64{}
	cnt := map[int]int{}
	for _, l := range logs {
		for _, p := range pick(l) {
			sum[p.step] += p.loss
			cnt[p.step]++
		}
	}
	var out []logPoint
	for step, c := range cnt {
		if c == len(logs) {
			out = append(out, logPoint{step, sum[step] / float64(c)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].step < out[j].step })
	return out
}

type logPoint struct {
	step int
	loss float64 // or, in runLog.acc, the accuracy
}

// runLog is a run's CSV log: training loss per step, validation loss
// and (a classifier's) validation accuracy where evaluated.
type runLog struct{ train, val, acc []logPoint }

// readLog reads a run's CSV log (step,loss,val_loss,lr,tokens_per_s, and
// a classifier's val_accuracy, a column found by its header) up to step
// last; a step logged twice (a resumed run re-logs the steps after its
// last save) counts once, its last line.
func readLog(path string, last int) (*runLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("run log: %w", err)
	}
	defer f.Close()
	train, val, acc := map[int]float64{}, map[int]float64{}, map[int]float64{}
	sc := bufio.NewScanner(f)
	line, accCol, want := 0, -1, 0
	for sc.Scan() {
		line++
		if line == 1 { // the header
			head := strings.Split(sc.Text(), ",")
			want = len(head)
			accCol = slices.Index(head, "val_accuracy")
			continue
		}
		fields := strings.Split(sc.Text(), ",")
		if len(fields) < 3 || len(fields) <= accCol {
			return nil, fmt.Errorf("run log %s:%d: %d fields, want %d", path, line, len(fields), want)
		}
		step, err := strconv.Atoi(fields[0])
		if err != nil {
			return nil, fmt.Errorf("run log %s:%d: step: %w", path, line, err)
		}
		if step > last {
			continue
		}
		cols := []struct {
			s string
			m map[int]float64
		}{{fields[1], train}, {fields[2], val}}
		if accCol >= 0 {
			cols = append(cols, struct {
				s string
				m map[int]float64
			}{fields[accCol], acc})
		}
		for _, c := range cols {
			if c.s == "" {
				delete(c.m, step)
				continue
			}
			x, err := strconv.ParseFloat(c.s, 64)
			if err != nil {
				return nil, fmt.Errorf("run log %s:%d: %w", path, line, err)
			}
			c.m[step] = x
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("run log %s: %w", path, err)
	}
	l := &runLog{}
	for _, kv := range []struct {
		m   map[int]float64
		dst *[]logPoint
	}{{train, &l.train}, {val, &l.val}, {acc, &l.acc}} {
		for s, x := range kv.m {
			*kv.dst = append(*kv.dst, logPoint{s, x})
		}
		sort.Slice(*kv.dst, func(i, j int) bool { return (*kv.dst)[i].step < (*kv.dst)[j].step })
	}
	return l, nil
}

// windowCount is n, or "the" when the rows' counts differ (0).
func windowCount(n int) string {
	if n <= 0 {
		return "the"
	}
	return strconv.Itoa(n)
}
