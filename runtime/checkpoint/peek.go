package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sort"
)

// PeekHeader is ReadHeader reading only the file's header: the spec, the
// step, a classifier's labels and the tensor table (names, dtypes, shapes and offsets), checked
// against the file's size as Read checks them, but no tensor data, so it
// costs the same for any size of checkpoint. The File's tensors hold no
// data (Float32s fails on them).
func PeekHeader(path string) (*Header, error) {
	f, err := peekTable(path)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	s, step, err := specStep(f)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	labels, err := specLabels(f, s)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	return &Header{File: f, Spec: *s, Step: step, Labels: labels}, nil
}

// peekTable reads and validates the header of the safetensors file at path.
func peekTable(path string) (*File, error) {
	fail := func(format string, args ...any) (*File, error) {
		return nil, fmt.Errorf("%s: not a valid safetensors file: %s", path, fmt.Sprintf(format, args...))
	}
	r, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file: %w", path, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, not a safetensors file", path)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (a device, pipe or socket), not a safetensors file", path)
	}
	size := fi.Size()
	if size < 8 {
		return fail("%d bytes is shorter than the 8-byte header length", size)
	}
	var lb [8]byte
	if _, err := r.ReadAt(lb[:], 0); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	hlen := binary.LittleEndian.Uint64(lb[:])
	if err := checkHeaderLen(hlen, size); err != nil {
		return fail("%v", err)
	}
	h := make([]byte, hlen)
	if _, err := r.ReadAt(h, 8); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	raw, meta, err := decodeHeader(h)
	if err != nil {
		return fail("%v", err)
	}
	body := size - 8 - int64(hlen)
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
		esize, ok := dtypeSize[*e.DType]
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
		if t.Begin < 0 || t.End < t.Begin || t.End > body {
			return fail("tensor %q: data_offsets [%d, %d] out of range of the %d-byte data section (truncated?)", name, t.Begin, t.End, body)
		}
		if t.End-t.Begin != elems*int64(esize) {
			return fail("tensor %q: data_offsets [%d, %d] hold %d bytes, but %s %v needs %d", name, t.Begin, t.End, t.End-t.Begin, t.DType, t.Shape, elems*int64(esize))
		}
		f.Tensors[name] = t
		list = append(list, t)
	}
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
	if at != body {
		return fail("the data section has %d bytes but the tensors cover %d (trailing garbage?)", body, at)
	}
	return f, nil
}
