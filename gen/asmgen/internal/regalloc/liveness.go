package regalloc

import (
	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/reg"
)

// liveness is the register liveness of a function, as avo's pass.Liveness
// computes it (the same sets: liveness has one least fixed point), in a
// form the allocator walks fast. avo keeps a map of register masks per
// instruction and updates whole maps until nothing changes: 46% of
// rendering a package. Here registers are numbered densely, a set is a
// byte of mask bits per register (a mask is at most 7 bits, reg.S512),
// and the fixed point is taken over basic blocks, each instruction
// changing only its own registers' bytes; the sets after each instruction
// are then recomputed block by block when asked for (each).
type liveness struct {
	is     []*ir.Instruction
	ids    []reg.ID         // register of each number
	num    map[reg.ID]int32 // number of each register
	uses   [][]regMask      // per instruction: its inputs, masks merged per register
	defs   [][]regMask      // per instruction: its outputs, the same
	starts []int            // first instruction of each block; a final len(is)
	succ   [][]int          // successor blocks of each block
	in     [][]uint8        // registers live into each block
}

// regMask is a register number and mask bits.
type regMask struct {
	r    int32
	mask uint8
}

// newLiveness computes fn's liveness; fn has been through pass.CFG.
func newLiveness(fn *ir.Function) *liveness {
	l := &liveness{is: fn.Instructions(), num: map[reg.ID]int32{}}
	n := len(l.is)
	masks := func(rs []reg.Register) []regMask {
		var out []regMask
	next:
		for _, r := range rs {
			id := r.ID()
			k, ok := l.num[id]
			if !ok {
				k = int32(len(l.ids))
				l.num[id] = k
				l.ids = append(l.ids, id)
			}
			for j := range out {
				if out[j].r == k {
					out[j].mask |= uint8(r.Mask())
					continue next
				}
			}
			out = append(out, regMask{k, uint8(r.Mask())})
		}
		return out
	}
	l.uses = make([][]regMask, n)
	l.defs = make([][]regMask, n)
	index := make(map[*ir.Instruction]int, n)
	for k, i := range l.is {
		l.uses[k] = masks(i.InputRegisters())
		l.defs[k] = masks(i.OutputRegisters())
		index[i] = k
	}
	// Blocks: a new one after any instruction that does not fall through
	// to the next alone, and at any instruction reached otherwise.
	leader := make([]bool, n+1)
	leader[0] = true
	for k, i := range l.is {
		if len(i.Succ) != 1 || i.Succ[0] == nil || index[i.Succ[0]] != k+1 {
			leader[k+1] = true
		}
		for _, s := range i.Succ {
			if s != nil {
				if t := index[s]; t != k+1 {
					leader[t] = true
				}
			}
		}
	}
	block := make([]int, n)
	for k := range n {
		if leader[k] {
			l.starts = append(l.starts, k)
		}
		block[k] = len(l.starts) - 1
	}
	l.starts = append(l.starts, n)
	nb := len(l.starts) - 1
	l.succ = make([][]int, nb)
	for b := range nb {
		last := l.is[l.starts[b+1]-1]
		for _, s := range last.Succ {
			if s != nil {
				l.succ[b] = append(l.succ[b], block[index[s]])
			}
		}
	}
	// The fixed point, blocks in reverse order (most edges go forward).
	nr := len(l.ids)
	l.in = make([][]uint8, nb)
	for b := range l.in {
		l.in[b] = make([]uint8, nr)
	}
	live := make([]uint8, nr)
	for changed := true; changed; {
		changed = false
		for b := nb - 1; b >= 0; b-- {
			l.out(b, live)
			for k := l.starts[b+1] - 1; k >= l.starts[b]; k-- {
				l.step(k, live)
			}
			in := l.in[b]
			for r, m := range live {
				if m != in[r] {
					copy(in, live)
					changed = true
					break
				}
			}
		}
	}
	return l
}

// out sets live to the registers live out of block b.
func (l *liveness) out(b int, live []uint8) {
	clear(live)
	for _, s := range l.succ[b] {
		for r, m := range l.in[s] {
			live[r] |= m
		}
	}
}

// step turns live, the registers live after instruction k, into those
// live before it: in = use ∪ (out − def).
func (l *liveness) step(k int, live []uint8) {
	for _, d := range l.defs[k] {
		live[d.r] &^= d.mask
	}
	for _, u := range l.uses[k] {
		live[u.r] |= u.mask
	}
}

// each calls f for every instruction with the registers live after it:
// live holds their masks by number, and members lists the numbers whose
// mask is not zero, in no particular order. f must not keep either.
func (l *liveness) each(f func(i *ir.Instruction, live []uint8, members []int32)) {
	live := make([]uint8, len(l.ids))
	pos := make([]int32, len(l.ids)) // index in members, or −1
	var members []int32
	set := func(r int32, m uint8) {
		was := live[r] != 0
		live[r] = m
		switch {
		case m != 0 && !was:
			pos[r] = int32(len(members))
			members = append(members, r)
		case m == 0 && was:
			last := members[len(members)-1]
			members[pos[r]] = last
			pos[last] = pos[r]
			members = members[:len(members)-1]
			pos[r] = -1
		}
	}
	for b := range l.succ {
		l.out(b, live)
		members = members[:0]
		for r, m := range live {
			pos[r] = -1
			if m != 0 {
				pos[r] = int32(len(members))
				members = append(members, int32(r))
			}
		}
		for k := l.starts[b+1] - 1; k >= l.starts[b]; k-- {
			f(l.is[k], live, members)
			for _, d := range l.defs[k] {
				set(d.r, live[d.r]&^d.mask)
			}
			for _, u := range l.uses[k] {
				set(u.r, live[u.r]|u.mask)
			}
		}
	}
}
