package listops

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"
)

// bruteEval evaluates an expression in LRA's token form ("[MAX 2 9 ]"),
// recursively, with the median computed as numpy does (a float mean of the
// middle two) and truncated as int() does. It is independent of the
// generator's evaluation: different input form, different arithmetic. It
// also reports the expression's depth (a digit alone has depth 1) and the
// largest argument count.
func bruteEval(tokens []string) (value, depth, maxArgs int, err error) {
	pos := 0
	var node func(d int) (int, int, error)
	node = func(d int) (int, int, error) {
		if pos >= len(tokens) {
			return 0, 0, errors.New("unexpected end")
		}
		tok := tokens[pos]
		pos++
		if len(tok) == 1 && tok[0] >= '0' && tok[0] <= '9' {
			return int(tok[0] - '0'), d, nil
		}
		var args []int
		deepest := d
		for {
			if pos >= len(tokens) {
				return 0, 0, fmt.Errorf("%s is never closed", tok)
			}
			if tokens[pos] == "]" {
				pos++
				break
			}
			v, dd, err := node(d + 1)
			if err != nil {
				return 0, 0, err
			}
			args = append(args, v)
			deepest = max(deepest, dd)
		}
		if len(args) < 2 {
			return 0, 0, fmt.Errorf("%s has %d arguments", tok, len(args))
		}
		maxArgs = max(maxArgs, len(args))
		switch tok {
		case "[MAX":
			m := args[0]
			for _, a := range args {
				if a > m {
					m = a
				}
			}
			return m, deepest, nil
		case "[MIN":
			m := args[0]
			for _, a := range args {
				if a < m {
					m = a
				}
			}
			return m, deepest, nil
		case "[MED":
			s := append([]int(nil), args...)
			sort.Ints(s)
			var med float64
			if n := len(s); n%2 == 1 {
				med = float64(s[n/2])
			} else {
				med = (float64(s[n/2-1]) + float64(s[n/2])) / 2
			}
			return int(math.Trunc(med)), deepest, nil
		case "[SM":
			s := 0
			for _, a := range args {
				s += a
			}
			return s % 10, deepest, nil
		}
		return 0, 0, fmt.Errorf("unknown token %q", tok)
	}
	v, d, err := node(1)
	if err == nil && pos != len(tokens) {
		err = fmt.Errorf("%d tokens after the expression", len(tokens)-pos)
	}
	return v, d, maxArgs, err
}

// checkSet checks every example of a generated set with bruteEval.
func checkSet(t *testing.T, o Options, ex []Example, seen map[string]bool) {
	t.Helper()
	o = o.withDefaults()
	for i, e := range ex {
		toks := strings.Fields(LRA(e.Text))
		if len(toks) != len(e.Text) {
			t.Fatalf("example %d: %d bytes but %d LRA tokens", i, len(e.Text), len(toks))
		}
		v, d, a, err := bruteEval(toks)
		if err != nil {
			t.Fatalf("example %d %q: %v", i, e.Text, err)
		}
		if v != e.Value {
			t.Fatalf("example %d %q: generator says %d, brute force %d", i, e.Text, e.Value, v)
		}
		if d > o.MaxDepth || a > o.MaxArgs {
			t.Fatalf("example %d %q: depth %d, %d arguments; limits %d, %d", i, e.Text, d, a, o.MaxDepth, o.MaxArgs)
		}
		if l := len(e.Text); l < o.MinLen || l > o.MaxLen {
			t.Fatalf("example %d: length %d outside %d…%d", i, l, o.MinLen, o.MaxLen)
		}
		if seen[string(e.Text)] {
			t.Fatalf("example %d %q drawn twice", i, e.Text)
		}
		seen[string(e.Text)] = true
	}
}

func TestBruteForceLabels(t *testing.T) {
	for _, c := range []struct {
		o      Options
		counts Counts
	}{
		{Options{MinLen: 20, MaxLen: 200}, Counts{3000, 500, 500}},
		{Options{MaxDepth: 4, MaxArgs: 3, MinLen: 4, MaxLen: 60}, Counts{2000, 200, 200}},
		{Options{MaxDepth: 2, MaxArgs: 10, MinLen: 1, MaxLen: 12}, Counts{1000, 0, 100}}, // digits and flat lists
		{Options{MinLen: 500, MaxLen: 2000}, Counts{300, 50, 50}},                        // LRA's setting
	} {
		s, err := Generate(7, c.o, c.counts)
		if err != nil {
			t.Fatalf("%+v: %v", c.o, err)
		}
		if len(s.Train) != c.counts.Train || len(s.Val) != c.counts.Val || len(s.Test) != c.counts.Test {
			t.Fatalf("%+v: splits %d/%d/%d, want %+v", c.o, len(s.Train), len(s.Val), len(s.Test), c.counts)
		}
		seen := map[string]bool{} // across the splits: no sequence in two
		checkSet(t, c.o, s.Train, seen)
		checkSet(t, c.o, s.Val, seen)
		checkSet(t, c.o, s.Test, seen)
		// Every label and operator occurs in a set this size.
		var labels [10]int
		ops := map[byte]int{}
		for _, e := range s.Train {
			labels[e.Value]++
			for _, b := range e.Text {
				ops[b]++
			}
		}
		for v, n := range labels {
			if n == 0 && c.o.MaxLen > 12 {
				t.Errorf("%+v: no training example has value %d", c.o, v)
			}
		}
		for _, op := range operators {
			if ops[op] == 0 {
				t.Errorf("%+v: operator %c never drawn", c.o, op)
			}
		}
	}
}

// TestBruteEvalCatches makes sure the checker can fail: wrong values and
// malformed expressions are caught.
func TestBruteEvalCatches(t *testing.T) {
	for _, c := range []struct {
		text string
		v    int
		bad  bool
	}{
		{"X29]", 9, false},
		{"N29]", 2, false},
		{"D1234]", 2, false}, // (2+3)/2 = 2.5 → 2
		{"D19]", 5, false},
		{"D819]", 8, false},
		{"S999]", 7, false},
		{"X29N47]0]", 9, false},
		{"SN47]X12]]", 6, false},
		{"7", 7, false},
		{"X2]", 0, true},   // one argument
		{"X29", 0, true},   // not closed
		{"X29]]", 0, true}, // extra close
		{"X2a]", 0, true},  // not a token
	} {
		v, _, _, err := bruteEval(strings.Fields(LRA([]byte(c.text))))
		if (err != nil) != c.bad || !c.bad && v != c.v {
			t.Errorf("%s: %d, %v; want %d (bad %v)", c.text, v, err, c.v, c.bad)
		}
		if !c.bad {
			// The generator's own evaluation agrees on these.
			if got := evalBytes(t, []byte(c.text)); got != c.v {
				t.Errorf("%s: apply gives %d, want %d", c.text, got, c.v)
			}
		}
	}
}

// evalBytes evaluates the byte form with the package's apply.
func evalBytes(t *testing.T, text []byte) int {
	var stack [][]int
	var ops []byte
	stack = append(stack, nil)
	for _, c := range text {
		switch {
		case c >= '0' && c <= '9':
			stack[len(stack)-1] = append(stack[len(stack)-1], int(c-'0'))
		case c == Close:
			v := apply(ops[len(ops)-1], stack[len(stack)-1])
			ops, stack = ops[:len(ops)-1], stack[:len(stack)-1]
			stack[len(stack)-1] = append(stack[len(stack)-1], v)
		default:
			ops = append(ops, c)
			stack = append(stack, nil)
		}
	}
	return stack[0][0]
}

func TestLRAForm(t *testing.T) {
	if got, want := LRA([]byte("X29N47]0]")), "[MAX 2 9 [MIN 4 7 ] 0 ]"; got != want {
		t.Errorf("LRA = %q, want %q", got, want)
	}
	if got, want := LRA([]byte("DS12]3]")), "[MED [SM 1 2 ] 3 ]"; got != want {
		t.Errorf("LRA = %q, want %q", got, want)
	}
}

func TestReproducible(t *testing.T) {
	o := Options{MinLen: 30, MaxLen: 300}
	a, err := Generate(42, o, Counts{200, 20, 20})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(42, o, Counts{200, 20, 20})
	c, _ := Generate(43, o, Counts{200, 20, 20})
	same := func(x, y []Example) bool {
		for i := range x {
			if !bytes.Equal(x[i].Text, y[i].Text) || x[i].Value != y[i].Value {
				return false
			}
		}
		return len(x) == len(y)
	}
	if !same(a.Train, b.Train) || !same(a.Val, b.Val) || !same(a.Test, b.Test) {
		t.Error("the same seed gave different sets")
	}
	if same(a.Train, c.Train) {
		t.Error("seeds 42 and 43 gave the same training set")
	}
	// A longer run starts with the same sequences: the splits are cuts of
	// one stream.
	d, _ := Generate(42, o, Counts{220, 0, 0})
	if !same(d.Train[:200], a.Train) || !same(d.Train[200:], a.Val) {
		t.Error("the splits are not consecutive cuts of the seed's stream")
	}
}

func TestOptionErrors(t *testing.T) {
	for _, c := range []struct {
		o      Options
		option string
	}{
		{Options{MaxDepth: -1}, "MaxDepth"},
		{Options{MaxDepth: MaxMaxDepth + 1}, "MaxDepth"},
		{Options{MaxArgs: 1}, "MaxArgs"},
		{Options{MinLen: -5}, "MinLen"},
		{Options{MinLen: 10, MaxLen: 9}, "MaxLen"},
		{Options{MinLen: 1, MaxLen: MaxMaxLen + 1}, "MaxLen"},
		{Options{MaxDepth: 1, MinLen: 2, MaxLen: 9}, "MinLen"},               // depth 1: digits only
		{Options{MaxDepth: 3, MaxArgs: 2, MinLen: 11, MaxLen: 99}, "MinLen"}, // longest is 2+2·4 = 10
		{Options{MinLen: 2, MaxLen: 3}, "MaxLen"},
	} {
		_, err := Generate(1, c.o, Counts{Train: 1})
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.option {
			t.Errorf("%+v: %v, want an error of %s", c.o, err, c.option)
		}
	}
	if Longest(3, 2) != 10 || Longest(1, 10) != 1 || Longest(10, 10) != MaxMaxLen+1 {
		t.Errorf("Longest: %d %d %d", Longest(3, 2), Longest(1, 10), Longest(10, 10))
	}
	if _, err := Generate(1, Options{MaxDepth: 3, MaxArgs: 2, MinLen: 10, MaxLen: 10}, Counts{Train: 1}); err != nil {
		t.Errorf("the longest length itself: %v", err)
	}
	if _, err := Generate(1, Options{}, Counts{}); err == nil {
		t.Error("no sequences asked: no error")
	}
	if _, err := Generate(1, Options{}, Counts{Train: 5, Val: -1}); err == nil {
		t.Error("negative count: no error")
	}
	for _, c := range []Counts{{Train: MaxCount + 1}, {Train: MaxCount, Test: 1}, {Train: 1 << 62, Val: 1 << 62, Test: 1 << 62}, {Train: MaxBytes/DefaultMaxLen + 1}} {
		if _, err := Generate(1, Options{}, c); err == nil || !strings.Contains(err.Error(), "at most") {
			t.Errorf("counts %+v: %v", c, err)
		}
	}
	// Trees of depth 100 and 100 arguments mostly overshoot a narrow range
	// near the largest length: the work bound ends the search.
	start := time.Now()
	_, err := Generate(1, Options{MaxDepth: MaxMaxDepth, MaxArgs: MaxMaxArgs, MinLen: MaxMaxLen - 3, MaxLen: MaxMaxLen}, Counts{Train: 1})
	if !errors.Is(err, ErrExhausted) {
		t.Errorf("a near-impossible range: %v, want ErrExhausted", err)
	}
	t.Logf("gave up after %v: %v", time.Since(start), err)
	// Only ten sequences have length 1.
	_, err = Generate(1, Options{MinLen: 1, MaxLen: 1}, Counts{Train: 11})
	if !errors.Is(err, ErrExhausted) {
		t.Errorf("11 distinct digits: %v, want ErrExhausted", err)
	}
}
