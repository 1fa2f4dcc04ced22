package regalloc

import (
	"cmp"
	"container/heap"
	"errors"
	"slices"

	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/reg"
)

// Allocate is avo's pass.AllocateRegisters (v0.6.0) with the
// same allocation, in a fraction of its time. avo's greedy colouring
// repeats, until every virtual register has a physical one: take the
// virtual with the fewest possible registers left (the smallest ID on a
// tie), give it the first of them, then strike that register from the
// possible ones of every virtual it interferes with. avo finds those
// neighbours by scanning every remaining interference edge, through map
// lookups, after each allocation — quadratic in the function's length,
// and 75% of rendering a long-row softmax-value package. Here each
// virtual keeps its neighbours in a list built once, so a step touches
// only its own edges; the next virtual comes from a heap rather than a
// scan of all that are left; and the live registers come from liveness
// (liveness.go) rather than avo's pass.Liveness, which Compile no longer
// runs. The choices, and the errors, are avo's:
// asmgen's TestAllocateRegistersIsAvos compares the two on every kernel of
// several specs, and go generate's check the shipped packages' files.
func Allocate(fn *ir.Function) error {
	type kindState struct {
		registers []reg.ID // allocatable, in avo's order of preference
		possible  map[reg.ID][]reg.ID
		adj       map[reg.ID][]reg.ID // virtual–virtual interferences, both ways
		self      map[reg.ID]bool     // a virtual interfering with itself
		order     []reg.ID            // the virtuals
	}
	kinds := map[reg.Kind]*kindState{}
	state := func(k reg.Kind) (*kindState, error) {
		if s, ok := kinds[k]; ok {
			return s, nil
		}
		f := reg.FamilyOfKind(k)
		if f == nil {
			return nil, errors.New("unknown register family")
		}
		seen := map[reg.ID]bool{}
		var ids []reg.ID
		base := map[reg.ID]bool{}
		for _, r := range f.Registers() {
			if r.Info()&reg.BasePointer != 0 {
				base[r.ID()] = true
			}
			if r.Info()&reg.Restricted != 0 || seen[r.ID()] {
				continue
			}
			seen[r.ID()] = true
			ids = append(ids, r.ID())
		}
		if len(ids) == 0 {
			return nil, errors.New("no allocatable registers")
		}
		// The base pointer last (it is callee-saved), the rest by ID.
		slices.SortFunc(ids, func(a, b reg.ID) int {
			if base[a] != base[b] {
				if base[b] {
					return -1
				}
				return 1
			}
			return cmp.Compare(a, b)
		})
		s := &kindState{registers: ids, possible: map[reg.ID][]reg.ID{}, adj: map[reg.ID][]reg.ID{}, self: map[reg.ID]bool{}}
		kinds[k] = s
		return s, nil
	}
	add := func(s *kindState, v reg.ID) {
		if !v.IsVirtual() {
			return
		}
		if _, ok := s.possible[v]; ok {
			return
		}
		var p []reg.ID
		for _, r := range s.registers {
			if r.Kind() == v.Kind() {
				p = append(p, r)
			}
		}
		s.possible[v] = p
		s.order = append(s.order, v)
	}
	discard := func(s *kindState, v, p reg.ID) {
		s.possible[v] = slices.DeleteFunc(s.possible[v], func(r reg.ID) bool { return r == p })
	}
	for _, i := range fn.Instructions() {
		for _, r := range i.Registers() {
			s, err := state(r.Kind())
			if err != nil {
				return err
			}
			add(s, r.ID())
		}
	}
	// Interferences: an output register with every other register live
	// after the instruction that shares bits with it.
	lv := newLiveness(fn)
	var err error
	lv.each(func(i *ir.Instruction, live []uint8, members []int32) {
		for _, d := range i.OutputRegisters() {
			if err != nil {
				return
			}
			k, x, dm := d.Kind(), d.ID(), uint8(d.Mask())
			s := kinds[k]
			xn := lv.num[x]
			for _, yn := range members {
				y := lv.ids[yn]
				if y.Kind() != k {
					continue
				}
				mask := live[yn]
				if yn == xn {
					mask &^= dm // avo discards the output's own bits
				}
				if dm&mask == 0 {
					continue
				}
				add(s, x)
				add(s, y)
				switch {
				case x.IsPhysical() && y.IsPhysical():
					if x == y {
						err = errors.New("impossible register allocation")
						return
					}
				case x.IsPhysical():
					discard(s, y, x)
				case y.IsPhysical():
					discard(s, x, y)
				case x == y:
					s.self[x] = true
				default:
					s.adj[x] = append(s.adj[x], y)
					s.adj[y] = append(s.adj[y], x)
				}
			}
		}
	})
	if err != nil {
		return err
	}
	fn.Allocation = reg.NewEmptyAllocation()
	for _, s := range kinds {
		// The virtuals by (possible registers left, ID) in a heap; a virtual
		// whose count drops is pushed again, and entries of allocated
		// virtuals or of counts since lowered are skipped.
		h := candidates{}
		for _, v := range s.order {
			h = append(h, candidate{len(s.possible[v]), v})
		}
		heap.Init(&h)
		for h.Len() > 0 {
			e := heap.Pop(&h).(candidate)
			v := e.id
			ps, open := s.possible[v]
			if !open || len(ps) != e.n {
				continue
			}
			if len(ps) == 0 {
				return errors.New("failed to allocate registers")
			}
			p := ps[0]
			fn.Allocation[v] = p
			delete(s.possible, v)
			if s.self[v] {
				return errors.New("impossible register allocation")
			}
			for _, u := range s.adj[v] {
				if ps, open := s.possible[u]; open {
					discard(s, u, p)
					if n := len(s.possible[u]); n != len(ps) {
						heap.Push(&h, candidate{n, u})
					}
				}
			}
		}
	}
	return nil
}

// candidate is a virtual register and the number of physical registers
// still possible for it; candidates is a min-heap of them by that number,
// then by ID: avo's order of allocation.
type candidate struct {
	n  int
	id reg.ID
}

type candidates []candidate

func (h candidates) Len() int { return len(h) }
func (h candidates) Less(i, j int) bool {
	return h[i].n < h[j].n || h[i].n == h[j].n && h[i].id < h[j].id
}
func (h candidates) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candidates) Push(x any)   { *h = append(*h, x.(candidate)) }
func (h *candidates) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
