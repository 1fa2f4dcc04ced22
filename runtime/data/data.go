// Package data is the training and evaluation data of the byte-level
// models: a file read as bytes (one token per byte, vocabulary 256), split
// into a training part (the first 90%) and a held-out validation part (the
// last 10%), random training windows drawn deterministically from
// (seed, step), and the consecutive evaluation windows of the model card;
// and for classifiers, labelled text files (TSV, CSV or JSON Lines: see
// ReadLabelled) with their labels mapped to classes.
package data

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// HeldOutDivisor sets the validation share: the last len/HeldOutDivisor
// bytes (10%) are held out.
const HeldOutDivisor = 10

// DefaultFile returns the default training text, Isaac Newton's Opticks as
// shipped with the Go distribution in $GOROOT/src/testdata.
func DefaultFile() (string, error) {
	const rel = "src/testdata/Isaac.Newton-Opticks.txt"
	var tried []string
	try := func(root string) string {
		if root == "" {
			return ""
		}
		p := filepath.Join(root, filepath.FromSlash(rel))
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
		tried = append(tried, p)
		return ""
	}
	// runtime.GOROOT is empty in binaries built with -trimpath; then ask go.
	if p := try(runtime.GOROOT()); p != "" {
		return p, nil
	}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if p := try(strings.TrimSpace(string(out))); p != "" {
			return p, nil
		}
	}
	if len(tried) == 0 {
		return "", errors.New("default data: GOROOT is unknown (neither runtime.GOROOT nor `go env GOROOT` answered); pass -data")
	}
	return "", fmt.Errorf("default data: %s not found; pass -data", strings.Join(tried, " or "))
}

// ReadFile reads path as training data: a regular, readable file. It
// returns a clear error naming the file for a missing or unreadable file
// or a directory.
func ReadFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &notExistError{path: path, err: err}
		}
		return nil, fmt.Errorf("data file %s: %w", path, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("data file %s: is a directory, not a file", path)
	}
	if !fi.Mode().IsRegular() {
		// A pipe or device has no size to bound the read: read at most
		// MaxStream bytes (/dev/zero never ends).
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("data file %s: %w", path, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, MaxStream+1))
		if err != nil {
			return nil, fmt.Errorf("data file %s: %w", path, err)
		}
		if len(b) > MaxStream {
			return nil, fmt.Errorf("data file %s: not a regular file, and it holds more than %d bytes", path, MaxStream)
		}
		return b, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("data file %s: %w", path, err)
	}
	return b, nil
}

// notExistError is a missing data file: "data file <path>: no such file",
// wrapping the file system's error (errors.Is(err, fs.ErrNotExist) holds).
type notExistError struct {
	path string
	err  error
}

func (e *notExistError) Error() string { return "data file " + e.path + ": no such file" }
func (e *notExistError) Unwrap() error { return e.err }

// MaxStream bounds what ReadFile reads from a file that is not a regular
// file (a pipe, a device), whose size is unknown: 1 GiB.
const MaxStream = 1 << 30

// CheckVocab returns an error naming the first byte of b that is not a
// token of a vocabulary of size vocab (only possible when vocab < 256).
func CheckVocab(name string, b []byte, vocab int) error {
	if vocab >= 256 {
		return nil
	}
	for i, c := range b {
		if int(c) >= vocab {
			return fmt.Errorf("%s: byte %d at offset %d is outside the model's vocabulary of %d", name, c, i, vocab)
		}
	}
	return nil
}

// Dataset is one data file split for training and validation.
type Dataset struct {
	Path  string // the file it came from
	Train []byte // the first len − len/10 bytes
	Val   []byte // the last len/10 bytes (held out)
}

// Split cuts b into training and validation parts for windows of n+1
// bytes: both parts must hold at least one window.
func Split(path string, b []byte, n int) (*Dataset, error) {
	if n < 1 {
		return nil, fmt.Errorf("data file %s: context length %d must be ≥ 1", path, n)
	}
	if len(b) < n+1 {
		return nil, fmt.Errorf("data file %s: %d bytes is too short: windows of the model need n+1 = %d bytes", path, len(b), n+1)
	}
	cut := len(b) - len(b)/HeldOutDivisor
	d := &Dataset{Path: path, Train: b[:cut], Val: b[cut:]}
	if len(d.Train) < n+1 || len(d.Val) < n+1 {
		return nil, fmt.Errorf("data file %s: %d bytes is too short: its 90%%/10%% training/validation split (%d/%d bytes) must leave each part at least n+1 = %d bytes (need ≥ %d bytes)",
			path, len(b), len(d.Train), len(d.Val), n+1, MinLen(n))
	}
	return d, nil
}

// MinLen is the shortest file that Split accepts for context n.
func MinLen(n int) int {
	// No shorter file holds n+1 bytes in its last 1/HeldOutDivisor, so the
	// search starts there rather than walking up from n+1.
	for l := HeldOutDivisor * (n + 1); ; l++ {
		if l/HeldOutDivisor >= n+1 && l-l/HeldOutDivisor >= n+1 {
			return l
		}
	}
}

// Load reads path and splits it for context n, checking that every byte is
// in a vocabulary of size vocab.
func Load(path string, n, vocab int) (*Dataset, error) {
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := CheckVocab("data file "+path, b, vocab); err != nil {
		return nil, err
	}
	return Split(path, b, n)
}

// Sampler draws training batches: batch windows of n+1 bytes at uniformly
// random offsets of a training text. The batch of step s depends on
// (seed, s) alone, so a resumed run sees the same batches as an
// uninterrupted one. It allocates nothing after New.
type Sampler struct {
	text    []byte
	n       int
	batch   int
	seed    uint64
	pcg     *rand.PCG
	rng     *rand.Rand
	Inputs  []int32 // batch·n tokens, sequence-major: the first n bytes of each window
	Targets []int32 // batch·n tokens: the last n bytes of each window
	Offsets []int   // the window offsets of the last batch
}

// NewSampler makes a sampler of batch windows of n+1 bytes of text.
func NewSampler(text []byte, n, batch int, seed uint64) (*Sampler, error) {
	if n < 1 || batch < 1 {
		return nil, fmt.Errorf("sampler: n = %d and batch = %d must be ≥ 1", n, batch)
	}
	if len(text) < n+1 {
		return nil, fmt.Errorf("sampler: text of %d bytes is shorter than a window of n+1 = %d bytes", len(text), n+1)
	}
	pcg := rand.NewPCG(0, 0)
	return &Sampler{
		text: text, n: n, batch: batch, seed: seed,
		pcg: pcg, rng: rand.New(pcg),
		Inputs:  make([]int32, batch*n),
		Targets: make([]int32, batch*n),
		Offsets: make([]int, batch),
	}, nil
}

// stepStream mixes the step into the PCG's second seed word so that the
// streams of consecutive steps are unrelated.
const stepStream = 0x9e3779b97f4a7c15

// Batch fills Inputs and Targets with the windows of step.
func (s *Sampler) Batch(step int) {
	s.pcg.Seed(s.seed, uint64(step)*stepStream^0xda942042e4dd58b5)
	span := len(s.text) - s.n // offsets 0 … len−n−1
	for b := 0; b < s.batch; b++ {
		off := s.rng.IntN(span)
		s.Offsets[b] = off
		w := s.text[off : off+s.n+1]
		in := s.Inputs[b*s.n : (b+1)*s.n]
		tg := s.Targets[b*s.n : (b+1)*s.n]
		for i := 0; i < s.n; i++ {
			in[i] = int32(w[i])
			tg[i] = int32(w[i+1])
		}
	}
}

// NumWindows is the number of evaluation windows of text for context n:
// consecutive, non-overlapping windows of n+1 bytes, a trailing partial
// window dropped, at most limit of them when limit > 0.
func NumWindows(text []byte, n, limit int) int {
	k := len(text) / (n + 1)
	if limit > 0 && k > limit {
		k = limit
	}
	return k
}

// Window fills in and tg with evaluation window k of text,
// data[k·(n+1) : (k+1)·(n+1)]: in gets its bytes 0..n−1, tg its bytes 1..n.
func Window(text []byte, n, k int, in, tg []int32) {
	w := text[k*(n+1) : (k+1)*(n+1)]
	for i := 0; i < n; i++ {
		in[i] = int32(w[i])
		tg[i] = int32(w[i+1])
	}
}
