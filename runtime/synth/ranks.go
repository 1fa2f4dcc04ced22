package synth

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"os"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/train"
)

// Comm is the communicator of a data-parallel run over several processes
// (ranks): runtime/mpi's *mpi.Comm (an Open MPI binding, built with the
// mpi tag) is one. Every rank calls the collective methods in the same
// order with buffers of the same length.
type Comm interface {
	Rank() int // this process, 0 … Size()−1
	Size() int // the number of ranks
	// AllreduceFloat32 and AllreduceFloat64 replace buf, on every rank,
	// by the element-wise sum of every rank's buf.
	AllreduceFloat32(buf []float32) error
	AllreduceFloat64(buf []float64) error
}

// Ranks makes the run one of c.Size() data-parallel ranks; every rank
// makes the same run (NewRun or ResumeRun with the same spec, options and
// files) with its own c.
//
// Every step, the global batch of Batch sequences (a classifier's:
// examples) is drawn from (seed, step) exactly as in a one-process run;
// rank r computes the contiguous share of it that train.Share gives (with
// B = Batch and P = c.Size(): B/P sequences, the first B mod P ranks one
// more; a classifier's share grouped by length), its loss and gradients
// weighted by its share's fraction of the batch, and c sums them, so the
// loss and gradient are the global batch's means; every rank then clips
// and updates identically. The weights therefore match a one-process run
// of the same settings (whatever its Workers) up to float32 rounding of
// the sums, and a checkpoint written by any number of ranks resumes with
// any other. Workers is the goroutines within each rank.
//
// Only rank 0 evaluates, logs (Log, OnEvent), writes the CSV log and
// saves checkpoints; the other ranks' Save does nothing. A cancelled
// context on any rank stops every rank after the same step (and rank 0
// saves). Before the first step the ranks check, collectively, that they
// hold the same settings, training text (a classifier's: training
// examples), weights and optimizer state, and
// every 100 steps that their weights are still identical: a difference is
// an error on every rank naming the ranks that differ. An error on one
// rank alone (a file it cannot read or write, a failed call of c) leaves
// the others waiting in their next collective call: end the job then
// (runtime/mpi's Comm.Abort; synth train does). Size() = 1 (or a nil c)
// is an ordinary run, byte for byte.
func Ranks(c Comm) Option { return setter("ranks", func(o *options) { o.comm = c }) }

// checkEvery is how often (in steps) the ranks compare their weights.
const checkEvery = 100

// dist is the data-parallel state of a run on several ranks: the train
// package's gradient reducer.
type dist struct {
	c          Comm
	rank, size int
	lo, hi     int // this rank's share of the batch

	flat  []float32 // the gradients, packed for one allreduce
	small []float64 // [loss, stop per rank, digest halves per rank (2·size)]

	parent context.Context         // the caller's context, read every step
	cancel context.CancelCauseFunc // cancels Train's context on every rank at once

	stats ReduceStats
}

// ReduceStats is the cost of a data-parallel run's gradient reductions on
// this rank so far.
type ReduceStats struct {
	Ranks, Rank  int
	Lo, Hi       int           // this rank's share of the batch: sequences [Lo, Hi)
	Steps        int           // reductions done
	BytesPerStep int           // bytes this rank passes to allreduce per step (gradients as float32, and a few float64)
	Allreduce    time.Duration // in the allreduce calls, waiting for the other ranks included
	Copy         time.Duration // packing and unpacking the gradients
}

// ReduceStats is the cost of the run's gradient reductions on this rank so
// far; zero for a run on one rank.
func (r *Run) ReduceStats() ReduceStats {
	if r.dist == nil {
		return ReduceStats{Ranks: 1}
	}
	return r.dist.stats
}

// distribute makes r one of the ranks of its Comm, if it has one of more
// than one rank: the trainer's share and reducer, rank 0 alone evaluating,
// logging and saving, and the collective check that every rank starts
// from the same state.
func (r *Run) distribute() error {
	c := r.o.comm
	if c == nil || c.Size() == 1 {
		return nil
	}
	rank, size := c.Rank(), c.Size()
	if size < 1 || rank < 0 || rank >= size {
		return fmt.Errorf("ranks: rank %d of %d", rank, size)
	}
	n := 0
	for _, p := range r.t.Model.Params {
		n += len(p.Grad)
	}
	d := &dist{c: c, rank: rank, size: size, flat: make([]float32, n), small: make([]float64, 1+3*size)}
	if err := r.t.Distribute(d, rank, size, rank == 0); err != nil {
		return err
	}
	d.lo, d.hi = train.Share(r.t.Cfg.Batch, rank, size)
	d.stats = ReduceStats{Ranks: size, Rank: rank, Lo: d.lo, Hi: d.hi, BytesPerStep: 4*n + 8*len(d.small)}
	r.dist = d
	r.plan.Ranks = size
	if rank != 0 {
		r.o.evalEvery, r.o.log, r.o.onEvent = 0, nil, nil
	}
	return d.checkStart(r)
}

// writes reports whether this rank writes the run's files: a run on one
// rank, or rank 0.
func (r *Run) writes() bool { return r.dist == nil || r.dist.rank == 0 }

// csvLogPath is where this rank writes the CSV log: nowhere but on rank 0.
func (r *Run) csvLogPath() string {
	if !r.writes() {
		return os.DevNull
	}
	return r.plan.CSV
}

// collective returns the context Train runs under: ctx itself on one rank;
// on several, a context that is cancelled on every rank after the same
// step, the first step after ctx is cancelled on any rank (each step's
// reduction tells every rank which ranks were cancelled).
func (r *Run) collective(ctx context.Context) (context.Context, func()) {
	if r.dist == nil {
		return ctx, func() {}
	}
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r.dist.parent, r.dist.cancel = ctx, cancel
	return cctx, func() { cancel(nil); r.dist.parent, r.dist.cancel = nil, nil }
}

// ReduceGrads sums the ranks' gradients and losses (train.GradReducer),
// and with them the ranks' stop requests and, every checkEvery steps,
// digests of their weights.
func (d *dist) ReduceGrads(step int, loss float64, params []*model.Param) (float64, error) {
	t0 := time.Now()
	k := 0
	for _, p := range params {
		k += copy(d.flat[k:], p.Grad)
	}
	t1 := time.Now()
	if err := d.c.AllreduceFloat32(d.flat); err != nil {
		return 0, fmt.Errorf("rank %d of %d: gradients: %w", d.rank, d.size, err)
	}
	t2 := time.Now()
	k = 0
	for _, p := range params {
		k += copy(p.Grad, d.flat[k:k+len(p.Grad)])
	}
	t3 := time.Now()

	clear(d.small)
	d.small[0] = loss
	if d.parent != nil && d.parent.Err() != nil {
		d.small[1+d.rank] = 1
	}
	check := step%checkEvery == 0 && step > 0
	if check {
		hi, lo := split(digestParams(params, false))
		d.small[1+d.size+2*d.rank], d.small[2+d.size+2*d.rank] = hi, lo
	}
	if err := d.c.AllreduceFloat64(d.small); err != nil {
		return 0, fmt.Errorf("rank %d of %d: loss: %w", d.rank, d.size, err)
	}
	t4 := time.Now()
	d.stats.Steps++
	d.stats.Allreduce += t2.Sub(t1) + t4.Sub(t3)
	d.stats.Copy += t1.Sub(t0) + t3.Sub(t2)

	if check {
		if bad := d.differ(d.small[1+d.size:], 1); len(bad) > 0 {
			return 0, fmt.Errorf("the weights of %s differ from rank 0's before step %d: the ranks' updates diverged", rankList(bad), step+1)
		}
	}
	var stopped []int
	for i := range d.size {
		if d.small[1+i] != 0 {
			stopped = append(stopped, i)
		}
	}
	if len(stopped) > 0 && d.cancel != nil {
		cause := context.Cause(d.parent)
		if d.parent.Err() == nil {
			cause = fmt.Errorf("%s was cancelled: %w", rankList(stopped), context.Canceled)
		}
		d.cancel(cause)
	}
	return d.small[0], nil
}

// differ returns the ranks whose groups of per digests (each digest two
// float64 halves, rank-major in s) differ from rank 0's.
func (d *dist) differ(s []float64, per int) []int {
	w := 2 * per
	var bad []int
	for i := 1; i < d.size; i++ {
		for j := range w {
			if s[i*w+j] != s[j] {
				bad = append(bad, i)
				break
			}
		}
	}
	return bad
}

// What checkStart compares, in the order of its digests.
var startParts = []string{
	"settings (spec, training configuration, start and stop steps)",
	"training text", // a classifier's: "training examples"
	"weights",
	"optimizer state",
}

// checkStart compares, over the ranks, digests of the run's settings,
// training data (trainDigest), weights and optimizer state: every rank must start from
// the same state, or their steps would differ.
func (d *dist) checkStart(r *Run) error {
	t := r.t
	var b strings.Builder
	meta := t.Cfg.Metadata()
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "%s\nstart %d stop %d step %d adam %d\n", t.Model.Spec.JSON(), r.plan.Start, r.plan.Stop, t.Step, t.Opt.Steps)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, meta[k])
	}
	tab := crc64.MakeTable(crc64.ECMA)
	dig := []uint64{
		crc64.Checksum([]byte(b.String()), tab),
		r.trainDigest(),
		digestParams(t.Model.Params, true),
		digestMoments(t.Opt.M, t.Opt.V),
	}
	per := len(dig)
	buf := make([]float64, 2*per*d.size)
	for i, x := range dig {
		buf[2*per*d.rank+2*i], buf[2*per*d.rank+2*i+1] = split(x)
	}
	if err := d.c.AllreduceFloat64(buf); err != nil {
		return fmt.Errorf("ranks: rank %d of %d: comparing the ranks' starting state: %w", d.rank, d.size, err)
	}
	var msgs []string
	for i, part := range startParts {
		if i == 1 && r.cset != nil {
			part = "training examples"
		}
		var bad []int
		for k := 1; k < d.size; k++ {
			o := 2*per*k + 2*i
			if buf[o] != buf[2*i] || buf[o+1] != buf[2*i+1] {
				bad = append(bad, k)
			}
		}
		if len(bad) > 0 {
			msgs = append(msgs, fmt.Sprintf("%s on %s", part, rankList(bad)))
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("ranks differ from rank 0 before the first step: %s; every rank must run the same command on the same files", strings.Join(msgs, "; "))
	}
	return nil
}

// trainDigest is a CRC-64 of the run's training data: a language model's
// training text, or a classifier's training examples (class and text of
// each, in order).
func (r *Run) trainDigest() uint64 {
	tab := crc64.MakeTable(crc64.ECMA)
	if r.cset == nil {
		return crc64.Checksum(r.ds.Train, tab)
	}
	var h uint64
	var b [8]byte
	for _, e := range r.cset.Examples {
		binary.LittleEndian.PutUint32(b[:4], uint32(e.Class))
		binary.LittleEndian.PutUint32(b[4:], uint32(len(e.Text)))
		h = crc64.Update(h, tab, b[:])
		h = crc64.Update(h, tab, e.Text)
	}
	return h
}

// rankList writes ranks as "rank 1" or "ranks 1, 3".
func rankList(ranks []int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = fmt.Sprint(r)
	}
	if len(s) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// split cuts x into two float64 values that carry it exactly (32 bits each).
func split(x uint64) (hi, lo float64) { return float64(x >> 32), float64(x & 0xffffffff) }

// floatBytes is the memory of x as bytes.
func floatBytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// digestParams is a CRC-64 of the parameters' values (and names, with
// names).
func digestParams(params []*model.Param, names bool) uint64 {
	tab := crc64.MakeTable(crc64.ECMA)
	var h uint64
	for _, p := range params {
		if names {
			h = crc64.Update(h, tab, []byte(p.Name))
		}
		h = crc64.Update(h, tab, floatBytes(p.Data))
	}
	return h
}

// digestMoments is a CRC-64 of AdamW's moments.
func digestMoments(m, v [][]float32) uint64 {
	tab := crc64.MakeTable(crc64.ECMA)
	var h uint64
	for i := range m {
		h = crc64.Update(h, tab, floatBytes(m[i]))
		h = crc64.Update(h, tab, floatBytes(v[i]))
	}
	return h
}

// shares writes how a batch is split over ranks: "8+8", "8×2", or
// "2×6+1×5" when uneven.
func shares(batch, ranks int) string {
	q, r := batch/ranks, batch%ranks
	switch {
	case r == 0 && ranks <= 4:
		return strings.TrimSuffix(strings.Repeat(fmt.Sprint(q)+"+", ranks), "+")
	case r == 0:
		return fmt.Sprintf("%d×%d", ranks, q)
	}
	return fmt.Sprintf("%d×%d+%d×%d", r, q+1, ranks-r, q)
}

// plural writes "1 worker" or "2 workers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
