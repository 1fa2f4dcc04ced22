package kernels

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/synthgen/synthgen/specs"
)

// ErrNotLinked matches (errors.Is) a NotLinkedError.
var ErrNotLinked = errors.New("spec not linked")

// NotLinkedError is the error for a spec whose generated package the
// program does not link; it says how to generate and link one.
type NotLinkedError struct {
	Name   string   // the spec asked for
	Linked []string // the specs the program links
}

func (e *NotLinkedError) Error() string {
	linked := strings.Join(e.Linked, ", ")
	if linked == "" {
		linked = "none"
	}
	return fmt.Sprintf("spec %q is not linked into this program (linked: %s): generate its package, "+
		"e.g. go run github.com/synthgen/synthgen/cmd/synthgen -spec %s.json -out DIR (or a //go:generate line), "+
		"and import it: import _ \"yourmodule/DIR\"", e.Name, linked, e.Name)
}

// Is reports whether target is ErrNotLinked.
func (e *NotLinkedError) Is(target error) bool { return target == ErrNotLinked }

// MismatchError is the error for a spec (a checkpoint's, say) that differs
// from the one the program links under the same name.
type MismatchError struct {
	Spec    specs.Spec // the spec asked for
	Linked  specs.Spec // the linked spec of the same name
	Package string     // the import path of the linked package
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("spec %s differs from the linked spec %q (package %s: %s). "+
		"If the spec file changed since that package was generated, regenerate it (go generate) and rebuild; "+
		"if the spec comes from another module with a spec of the same name, run a program that links that module's package "+
		"(its own main.go calling github.com/synthgen/synthgen/cli.Main, or its own code), or rename one of the two specs",
		e.Spec.JSON(), e.Linked.Name, e.Package, e.Linked.JSON())
}

type entry struct {
	spec specs.Spec
	sets []Set
	pkg  string // the import path of the registering package
}

var (
	mu       sync.Mutex
	registry = map[string]*entry{}
	dupes    = map[string][]string{} // spec name → the packages registering it after the first
)

// Register makes a generated package's kernels available under its spec's
// name. Generated packages call it from init, once per package, with one
// Set per instruction set compiled into this binary.
func Register(spec specs.Spec, sets ...Set) {
	pkg := callerPackage(2)
	mu.Lock()
	defer mu.Unlock()
	if _, ok := registry[spec.Name]; ok {
		dupes[spec.Name] = append(dupes[spec.Name], pkg) // reported by Lookup: two packages claim one name
		return
	}
	registry[spec.Name] = &entry{spec: spec, sets: append([]Set(nil), sets...), pkg: pkg}
}

// callerPackage is the import path of the package of the function skip
// frames up (the generated package's init calling Register), or "an
// unknown package".
func callerPackage(skip int) string {
	pc, _, _, ok := runtime.Caller(skip)
	f := runtime.FuncForPC(pc)
	if !ok || f == nil {
		return "an unknown package"
	}
	// "example.com/m/small.init.0": the path up to the last slash, then
	// the package name up to the first dot after it.
	name := f.Name()
	slash := strings.LastIndexByte(name, '/')
	if dot := strings.IndexByte(name[slash+1:], '.'); dot >= 0 {
		name = name[:slash+1+dot]
	}
	return name
}

// PackageOf is the import path of the generated package registered for
// spec name.
func PackageOf(name string) (string, error) {
	e, err := get(name)
	if err != nil {
		return "", err
	}
	return e.pkg, nil
}

// Names lists the linked specs, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Spec returns the linked spec called name.
func Spec(name string) (specs.Spec, error) {
	e, err := get(name)
	if err != nil {
		return specs.Spec{}, err
	}
	return e.spec, nil
}

func get(name string) (*entry, error) {
	mu.Lock()
	defer mu.Unlock()
	e, ok := registry[name]
	if !ok {
		names := make([]string, 0, len(registry))
		for n := range registry {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, &NotLinkedError{Name: name, Linked: names}
	}
	if d := dupes[name]; len(d) > 0 {
		return nil, fmt.Errorf("spec %q is registered by %d generated packages, %s and %s: a program links one package per spec name; "+
			"import only one of them, or rename one spec (its \"name\" field) and regenerate its package", name, len(d)+1, e.pkg, strings.Join(d, " and "))
	}
	return e, nil
}

// Sets returns the kernel sets of spec name that this CPU can run, lowest
// level first: for tests and benchmarks that compare the levels.
func Sets(name string) ([]Set, error) {
	e, err := get(name)
	if err != nil {
		return nil, err
	}
	var out []Set
	for _, s := range e.sets {
		if Supported(s.ISA) {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ISA < out[j].ISA })
	return out, nil
}

// Kernels is the dispatched kernel set of one spec: each field is the
// implementation of the highest level allowed (by the CPU and SYNTHGEN_ISA)
// that provides it.
type Kernels struct {
	Set
	Spec specs.Spec
	// Chosen maps each provided kernel's field name to the level it runs on.
	Chosen map[string]ISA
}

// Lookup dispatches spec name's kernels at Level().
func Lookup(name string) (*Kernels, error) {
	l, err := Level()
	if err != nil {
		return nil, err
	}
	return LookupAt(name, l)
}

// For dispatches the kernels of spec s at Level(), checking that the
// package linked under s's name was generated from exactly s.
func For(s specs.Spec) (*Kernels, error) {
	l, err := Level()
	if err != nil {
		return nil, err
	}
	return ForAt(s, l)
}

// ForAt is For at level l or below, whatever SYNTHGEN_ISA says.
func ForAt(s specs.Spec, l ISA) (*Kernels, error) {
	e, err := get(s.Name)
	if err != nil {
		return nil, err
	}
	if linked := e.spec; linked.JSON() != s.JSON() {
		return nil, &MismatchError{Spec: s, Linked: linked, Package: e.pkg}
	}
	return LookupAt(s.Name, l)
}

// LookupAt dispatches spec name's kernels at level l or below.
func LookupAt(name string, l ISA) (*Kernels, error) {
	e, err := get(name)
	if err != nil {
		return nil, err
	}
	if !Supported(l) {
		return nil, fmt.Errorf("instruction set %s: this CPU lacks %s", l, strings.Join(missing(l), ", "))
	}
	k := &Kernels{Spec: e.spec, Chosen: map[string]ISA{}}
	k.Set.ISA = l
	dst := reflect.ValueOf(&k.Set).Elem()
	typ := dst.Type()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Func {
			continue
		}
		best := -1
		for si, s := range e.sets {
			if s.ISA > l || reflect.ValueOf(s).Field(i).IsNil() {
				continue
			}
			if best < 0 || s.ISA > e.sets[best].ISA {
				best = si
			}
		}
		if best >= 0 {
			dst.Field(i).Set(reflect.ValueOf(e.sets[best]).Field(i))
			k.Chosen[f.Name] = e.sets[best].ISA
		}
	}
	return k, nil
}

// KernelNames lists the kernel fields this dispatched set provides, in
// declaration order.
func (k *Kernels) KernelNames() []string {
	typ := reflect.TypeOf(k.Set)
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		if _, ok := k.Chosen[typ.Field(i).Name]; ok {
			out = append(out, typ.Field(i).Name)
		}
	}
	return out
}
