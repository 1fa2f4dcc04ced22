// Package checkpoint reads and writes model checkpoints and optimizer
// state as safetensors files: an 8-byte little-endian header length, a
// JSON header naming each tensor's dtype, shape and data offsets (plus a
// "__metadata__" map of strings), then the raw little-endian tensor data.
//
// Writes are atomic (a temporary file in the same directory, written,
// synced, closed, renamed over the target, and the directory synced), and
// reads validate everything before trusting it: a malformed, truncated or
// mismatched file is an error naming the file and the tensor, never a panic.
package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/synthgen/synthgen/internal/atomicfile"
	"github.com/synthgen/synthgen/internal/jsonkeys"
)

// MaxHeader is the largest JSON header accepted (as in the reference
// implementation): 100 MB.
const MaxHeader = 100 << 20

// MetadataKey is the header entry holding the string metadata.
const MetadataKey = "__metadata__"

// dtypeSize is the element size of each safetensors dtype.
var dtypeSize = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"U16": 2, "I16": 2, "F16": 2, "BF16": 2,
	"U32": 4, "I32": 4, "F32": 4,
	"U64": 8, "I64": 8, "F64": 8,
}

// Tensor is one tensor of a safetensors file.
type Tensor struct {
	Name  string
	DType string // "F32" for everything this project writes
	Shape []int
	Begin int64 // data offsets within the data section, [Begin, End)
	End   int64
	raw   []byte // the tensor's bytes (a view of the file), set by Parse
}

// Elems is the element count of the shape.
func (t *Tensor) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Float32s decodes an F32 tensor into dst, which must have Elems() elements.
func (t *Tensor) Float32s(dst []float32) error {
	if t.DType != "F32" {
		return fmt.Errorf("tensor %q: dtype %s, want F32", t.Name, t.DType)
	}
	if len(dst)*4 != len(t.raw) {
		return fmt.Errorf("tensor %q: holds %d bytes, want %d for %d float32s", t.Name, len(t.raw), 4*len(dst), len(dst))
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.raw[4*i:]))
	}
	return nil
}

// CheckFinite returns an error naming the tensor and the element when an
// F32 tensor holds a NaN or an infinity (a diverged run or a damaged file).
func (t *Tensor) CheckFinite() error {
	if t.DType != "F32" {
		return nil
	}
	for i := 0; i+4 <= len(t.raw); i += 4 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(t.raw[i:]))
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("tensor %q holds %v at element %d: the weights are not finite (a diverged run or a damaged file)", t.Name, x, i/4)
		}
	}
	return nil
}

// File is a parsed safetensors file.
type File struct {
	Path     string
	Metadata map[string]string
	Tensors  map[string]*Tensor
}

// Names lists the tensors sorted by name.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.Tensors))
	for n := range f.Tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Read reads and validates the safetensors file at path.
func Read(path string) (*File, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return Parse(path, b)
}

// rawEntry is one tensor entry of the header as written.
type rawEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// Parse validates the safetensors bytes b; path names the file in errors.
// The tensors of the result refer to b.
func Parse(path string, b []byte) (*File, error) {
	fail := func(format string, args ...any) (*File, error) {
		return nil, fmt.Errorf("%s: not a valid safetensors file: %s", path, fmt.Sprintf(format, args...))
	}
	if len(b) < 8 {
		return fail("%d bytes is shorter than the 8-byte header length", len(b))
	}
	hlen := binary.LittleEndian.Uint64(b)
	if err := checkHeaderLen(hlen, int64(len(b))); err != nil {
		return fail("%v", err)
	}
	body := b[8+hlen:]
	raw, meta, err := decodeHeader(b[8 : 8+hlen])
	if err != nil {
		return fail("%v", err)
	}
	f := &File{Path: path, Metadata: meta, Tensors: map[string]*Tensor{}}
	list := make([]*Tensor, 0, len(raw))
	for name, msg := range raw {
		var e rawEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return fail("tensor %q: header entry: %v", name, err)
		}
		if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
			return fail("tensor %q: header entry needs dtype, shape and data_offsets", name)
		}
		size, ok := dtypeSize[*e.DType]
		if !ok {
			return fail("tensor %q: unknown dtype %q", name, *e.DType)
		}
		t := &Tensor{Name: name, DType: *e.DType, Shape: make([]int, len(*e.Shape))}
		elems := int64(1)
		for i, d := range *e.Shape {
			if d < 0 || d > math.MaxInt32 {
				return fail("tensor %q: shape %v has a bad dimension", name, *e.Shape)
			}
			t.Shape[i] = int(d)
			if elems != 0 && d > 0 && elems > math.MaxInt64/8/d {
				return fail("tensor %q: shape %v is too large", name, *e.Shape)
			}
			elems *= d
		}
		off := *e.DataOffsets
		if len(off) != 2 {
			return fail("tensor %q: data_offsets %v must be [begin, end]", name, off)
		}
		t.Begin, t.End = off[0], off[1]
		if t.Begin < 0 || t.End < t.Begin || t.End > int64(len(body)) {
			return fail("tensor %q: data_offsets [%d, %d] out of range of the %d-byte data section (truncated?)", name, t.Begin, t.End, len(body))
		}
		if t.End-t.Begin != elems*int64(size) {
			return fail("tensor %q: data_offsets [%d, %d] hold %d bytes, but %s %v needs %d", name, t.Begin, t.End, t.End-t.Begin, t.DType, t.Shape, elems*int64(size))
		}
		t.raw = body[t.Begin:t.End:t.End]
		f.Tensors[name] = t
		list = append(list, t)
	}
	// The tensors must tile the data section exactly: no overlaps, no holes.
	sort.Slice(list, func(i, j int) bool {
		if list[i].Begin != list[j].Begin {
			return list[i].Begin < list[j].Begin
		}
		return list[i].End < list[j].End
	})
	var at int64
	for _, t := range list {
		if t.Begin != at {
			if t.Begin < at {
				return fail("tensor %q: data_offsets [%d, %d] overlap another tensor", t.Name, t.Begin, t.End)
			}
			return fail("tensor %q: data_offsets [%d, %d] leave a hole at byte %d of the data section", t.Name, t.Begin, t.End, at)
		}
		at = t.End
	}
	if at != int64(len(body)) {
		return fail("the data section has %d bytes but the tensors cover %d (trailing garbage?)", len(body), at)
	}
	return f, nil
}

// checkHeaderLen checks the header length hlen that a safetensors file of
// size bytes states, before anything of that length is allocated.
func checkHeaderLen(hlen uint64, size int64) error {
	if hlen > MaxHeader {
		return fmt.Errorf("header length %d exceeds the %d-byte limit (file truncated or not safetensors)", hlen, MaxHeader)
	}
	if hlen > uint64(size-8) {
		return fmt.Errorf("header length %d runs past the end of the %d-byte file (truncated?)", hlen, size)
	}
	return nil
}

// decodeHeader parses a safetensors header: the tensor entries (raw, by
// name) and the "__metadata__" strings (never nil).
func decodeHeader(header []byte) (raw map[string]json.RawMessage, meta map[string]string, err error) {
	if t := bytes.TrimSpace(header); len(t) == 0 || t[0] != '{' {
		return nil, nil, errors.New("the header is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	if err := dec.Decode(&raw); err != nil {
		return nil, nil, fmt.Errorf("header JSON: %v", err)
	}
	if dec.More() {
		return nil, nil, errors.New("text after the header's JSON object")
	}
	if err := jsonkeys.Check(header); err != nil {
		return nil, nil, fmt.Errorf("header JSON: %v", err)
	}
	meta = map[string]string{}
	if m, ok := raw[MetadataKey]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, nil, fmt.Errorf("%s must map strings to strings: %v", MetadataKey, err)
		}
		if meta == nil {
			meta = map[string]string{}
		}
		delete(raw, MetadataKey)
	}
	return raw, meta, nil
}

// WriteTensor is a tensor to write: F32 data with its shape.
type WriteTensor struct {
	Name  string
	Shape []int
	Data  []float32
}

type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Encode writes a safetensors file of tensors (data in the order given)
// and metadata to w.
func Encode(w io.Writer, tensors []WriteTensor, metadata map[string]string) error {
	header := map[string]any{}
	if len(metadata) > 0 {
		header[MetadataKey] = metadata
	}
	var at int64
	for _, t := range tensors {
		if t.Name == MetadataKey || t.Name == "" {
			return fmt.Errorf("tensor name %q is reserved", t.Name)
		}
		if _, dup := header[t.Name]; dup {
			return fmt.Errorf("tensor %q appears twice", t.Name)
		}
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		if n != len(t.Data) {
			return fmt.Errorf("tensor %q: shape %v has %d elements, data has %d", t.Name, t.Shape, n, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = headerEntry{DType: "F32", Shape: shape, DataOffsets: []int64{at, at + 4*int64(n)}}
		at += 4 * int64(n)
	}
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("encode header: %w", err)
	}
	// Pad the header with spaces so the data starts 8-byte aligned.
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(h)))
	bw.Write(lenBuf[:])
	bw.Write(h)
	var buf [4]byte
	for _, t := range tensors {
		for _, x := range t.Data {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(x))
			bw.Write(buf[:])
		}
	}
	return bw.Flush()
}

// Write writes a safetensors file to path atomically: into a temporary
// file in the same directory, synced and closed, renamed over path, and
// the directory synced.
func Write(path string, tensors []WriteTensor, metadata map[string]string) error {
	return atomicfile.Write(path, func(w io.Writer) error { return Encode(w, tensors, metadata) })
}
