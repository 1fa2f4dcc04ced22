package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/odd_ffn"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
)

// fuzzPath names the fuzzed file in errors, which must all mention it.
const fuzzPath = "fuzz/ck.safetensors"

// fuzzNets caches a model (with its optimizer) per linked spec, so that
// the target builds none per input.
var fuzzNets = map[string]*struct {
	m *model.Model
	o *optim.AdamW
}{}

// fuzzSeeds are the seed corpus of FuzzCheckpoint: a valid checkpoint and
// optimizer state of a linked spec (odd_ffn, the smallest), and damaged
// copies — truncated, overlapping and out-of-range offsets, a header
// claiming a huge size, wrong dtypes, a wrong shape for the spec, a
// missing, an extra tensor, bad metadata.
func fuzzSeeds(tb testing.TB) [][]byte {
	k, err := kernels.Lookup("odd_ffn")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := model.New(k.Spec, k, 3)
	if err != nil {
		tb.Fatal(err)
	}
	o := optim.NewAdamW(m.Params, optim.DefaultConfig())
	var ck, opt bytes.Buffer
	meta := map[string]string{KeySpec: m.Spec.JSON(), KeyStep: "12", KeyFormat: "pt"}
	if err := Encode(&ck, tensorsOf(m), meta); err != nil {
		tb.Fatal(err)
	}
	var ots []WriteTensor
	for i, p := range o.Params {
		ots = append(ots, WriteTensor{Name: PrefixM + p.Name, Shape: p.Shape, Data: o.M[i]})
	}
	for i, p := range o.Params {
		ots = append(ots, WriteTensor{Name: PrefixV + p.Name, Shape: p.Shape, Data: o.V[i]})
	}
	if err := Encode(&opt, ots, map[string]string{KeySpec: m.Spec.JSON(), KeyStep: "12", "adam.steps": "12"}); err != nil {
		tb.Fatal(err)
	}
	b := ck.Bytes()
	patch := func(edit func(h map[string]any)) []byte {
		hlen := binary.LittleEndian.Uint64(b)
		var h map[string]any
		if err := json.Unmarshal(b[8:8+hlen], &h); err != nil {
			tb.Fatal(err)
		}
		edit(h)
		nh, _ := json.Marshal(h)
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(nh)))
		out = append(out, nh...)
		return append(out, b[8+hlen:]...)
	}
	entry := func(h map[string]any, name string) map[string]any { return h[name].(map[string]any) }
	hugeHeader := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(hugeHeader, 1<<62)
	justUnder := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(justUnder, MaxHeader)
	seeds := [][]byte{
		b,
		opt.Bytes(),
		b[:len(b)/2],          // truncated in the data
		b[:40],                // truncated in the header
		b[:7],                 // shorter than the length
		hugeHeader,            // a header length of 4 EiB
		justUnder,             // a header length at the limit, past the file's end
		append(b, 0, 0, 0, 0), // trailing bytes
		patch(func(h map[string]any) { entry(h, "tok_emb")["data_offsets"] = []int64{0, 4 * 75 * 36} }),        // overlaps
		patch(func(h map[string]any) { entry(h, "lnf.bias")["data_offsets"] = []int64{1 << 40, 1<<40 + 144} }), // out of range
		patch(func(h map[string]any) { entry(h, "lnf.bias")["data_offsets"] = []int64{-4, 140} }),              // negative
		patch(func(h map[string]any) { entry(h, "lnf.bias")["dtype"] = "F64" }),                                // wrong dtype, size mismatch
		patch(func(h map[string]any) { entry(h, "lnf.bias")["dtype"] = "I32" }),                                // wrong dtype, same size
		patch(func(h map[string]any) { entry(h, "lnf.bias")["dtype"] = "Q4" }),                                 // unknown dtype
		patch(func(h map[string]any) { entry(h, "lnf.bias")["shape"] = []int{6, 6} }),                          // wrong shape for the spec
		patch(func(h map[string]any) { entry(h, "lnf.bias")["shape"] = []int64{1 << 31, 1 << 31, 1 << 31} }),   // huge shape
		patch(func(h map[string]any) {
			h["extra"] = map[string]any{"dtype": "F32", "shape": []int{0}, "data_offsets": []int{0, 0}}
		}),
		patch(func(h map[string]any) { delete(h, "lnf.bias") }),                                       // missing tensor (a hole)
		patch(func(h map[string]any) { h[MetadataKey].(map[string]any)[KeyStep] = "-3" }),             // bad step
		patch(func(h map[string]any) { h[MetadataKey].(map[string]any)[KeySpec] = `{"name":"big"}` }), // bad spec
		patch(func(h map[string]any) { h[MetadataKey] = []int{1} }),                                   // bad metadata
		[]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"),
		[]byte("\x04\x00\x00\x00\x00\x00\x00\x00null"),
	}
	return seeds
}

// maxFuzzData bounds the data section of a fuzzed file.
const maxFuzzData = 1 << 21

// split cuts a file into the three inputs of FuzzCheckpoint: its header
// length word, its header (at most the rest of the file) and the length of
// what follows. Fuzzing the header rather than the whole file keeps the
// inputs small (the tensors' bytes are never inspected beyond their
// count), so the fuzzer mutates and minimizes them quickly.
func split(b []byte) (hlen uint64, header []byte, dataLen uint32) {
	if len(b) < 8 {
		return 0, b, 0
	}
	hlen = binary.LittleEndian.Uint64(b)
	rest := b[8:]
	n := min(hlen, uint64(len(rest)))
	return hlen, rest[:n], uint32(len(rest) - int(n))
}

// join is the file of split's parts; the data bytes are a fixed pattern.
// A header shorter than 8 bytes with hlen 0 and no data is the file itself
// (files shorter than the length word).
func join(hlen uint64, header []byte, dataLen uint32) []byte {
	if hlen == 0 && dataLen == 0 && len(header) < 8 {
		return header
	}
	n := int(dataLen % maxFuzzData)
	b := make([]byte, 8, 8+len(header)+n)
	binary.LittleEndian.PutUint64(b, hlen)
	b = append(b, header...)
	return append(b, fuzzData[:n]...)
}

// fuzzData is the data pattern join appends.
var fuzzData = func() []byte {
	b := make([]byte, maxFuzzData)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}()

// FuzzCheckpoint feeds arbitrary files to the safetensors reader (Parse,
// the header-only ReadMetadata) and, when they parse, to the model loader
// (spec and step from the metadata, the linked kernels, the tensors
// against the spec's parameters) and the optimizer-state loader. Every
// rejection must be an error naming the file, never a panic; the bytes are
// in memory, so no allocation can exceed a bound set by their length. The
// file is fuzzed as its header length word, its header and the length of
// its data section (see split).
//
//	go test ./runtime/checkpoint -run '^$' -fuzz '^FuzzCheckpoint$' -fuzztime 5s
func FuzzCheckpoint(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		hlen, header, dataLen := split(s)
		f.Add(hlen, header, dataLen)
	}
	f.Fuzz(func(t *testing.T, hlen uint64, header []byte, dataLen uint32) {
		fuzzBody(t, hlen, header, dataLen)
	})
}

// fuzzBody is FuzzCheckpoint's check of one input.
func fuzzBody(t testing.TB, hlen uint64, header []byte, dataLen uint32) {
	b := join(hlen, header, dataLen)
	named := func(what string, err error) {
		if err != nil && !strings.Contains(err.Error(), fuzzPath) {
			t.Fatalf("%s: error %q does not name the file", what, err)
		}
	}
	meta, merr := readMetadata(fuzzPath, bytes.NewReader(b), int64(len(b)))
	named("ReadMetadata", merr)
	file, err := Parse(fuzzPath, b)
	named("Parse", err)
	if err != nil {
		return
	}
	if merr != nil {
		t.Fatalf("Parse accepts what ReadMetadata rejects: %v", merr)
	}
	if fmt.Sprint(meta) != fmt.Sprint(file.Metadata) {
		t.Fatalf("ReadMetadata %v, Parse %v", meta, file.Metadata)
	}
	for _, tn := range file.Tensors {
		if int64(len(tn.raw)) != tn.End-tn.Begin || tn.End > int64(len(b)) {
			t.Fatalf("tensor %q: %d bytes for [%d, %d]", tn.Name, len(tn.raw), tn.Begin, tn.End)
		}
		if tn.DType == "F32" && tn.Elems() < 1<<16 {
			named("Float32s", tn.Float32s(make([]float32, tn.Elems())))
		}
	}
	s, step, err := specStep(file)
	named("metadata", err)
	if err != nil {
		return
	}
	k, err := Kernels(fuzzPath, s)
	named("Kernels", err)
	if err != nil {
		return
	}
	net := fuzzNets[s.Name]
	if net == nil {
		m, err := model.New(*s, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		net = &struct {
			m *model.Model
			o *optim.AdamW
		}{m, optim.NewAdamW(m.Params, optim.DefaultConfig())}
		fuzzNets[s.Name] = net
	}
	h := &Header{File: file, Spec: *s, Step: step}
	named("Into", h.Into(net.m))
	_, err = loadOpt(file, net.m, net.o, step)
	named("LoadOpt", err)
}
