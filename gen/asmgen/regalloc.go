package asmgen

import (
	"cmp"
	"errors"
	"slices"

	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/reg"
)

// allocateRegisters is avo's pass.AllocateRegisters (v0.6.0) with the
// same allocation, in a fraction of its time. avo's greedy colouring
// repeats, until every virtual register has a physical one: take the
// virtual with the fewest possible registers left (the smallest ID on a
// tie), give it the first of them, then strike that register from the
// possible ones of every virtual it interferes with. avo finds those
// neighbours by scanning every remaining interference edge, through map
// lookups, after each allocation — quadratic in the function's length,
// and 75% of rendering a long-row softmax-value package. Here each
// virtual keeps its neighbours in a list built once, so a step touches
// only its own edges. The choices, and the errors, are avo's:
// TestAllocateRegistersIsAvos compares the two on every kernel of several
// specs, and go generate's check the shipped packages' files.
func allocateRegisters(fn *ir.Function) error {
	type kindState struct {
		registers []reg.ID // allocatable, in avo's order of preference
		possible  map[reg.ID][]reg.ID
		adj       map[reg.ID][]reg.ID // virtual–virtual interferences, both ways
		self      map[reg.ID]bool     // a virtual interfering with itself
		order     []reg.ID            // the virtuals, sorted by ID
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
	for _, i := range fn.Instructions() {
		for _, d := range i.OutputRegisters() {
			k := d.Kind()
			s := kinds[k]
			out := i.LiveOut.OfKind(k)
			out.DiscardRegister(d)
			x := d.ID()
			for y, mask := range out {
				if d.Mask()&mask == 0 {
					continue
				}
				add(s, x)
				add(s, y)
				switch {
				case x.IsPhysical() && y.IsPhysical():
					if x == y {
						return errors.New("impossible register allocation")
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
	}
	fn.Allocation = reg.NewEmptyAllocation()
	for _, s := range kinds {
		slices.Sort(s.order)
		left := s.order
		for len(left) > 0 {
			best := 0
			for j, v := range left {
				if len(s.possible[v]) < len(s.possible[left[best]]) {
					best = j
				}
			}
			v := left[best]
			left = slices.Delete(left, best, best+1)
			ps := s.possible[v]
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
				if _, open := s.possible[u]; open {
					discard(s, u, p)
				}
			}
		}
	}
	return nil
}
