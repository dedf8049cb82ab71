package steps

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"
)

// Option is one option of a step kind, from its options struct: a field
// tagged `opt:"name"` (in the struct or a struct it embeds), with an
// optional `default:"..."` and an optional `type:"..."` naming the
// ValueType it takes, one a kind pack registered (RegisterType); without
// one a string, int, bool or time.Duration field takes the engine's type of
// it. An option without a default must be given in the runbook's `with:`.
// An options struct with a Validate() error method is checked once every
// option is set (values that only make sense together, a string that must
// be one of a few words).
type Option struct {
	Name       string
	Type       ValueType
	Default    string
	HasDefault bool
	field      []int // index path: options may sit in an embedded struct
}

// KindSpec is a registered step kind: its name, its options and the
// artifacts it reads or writes.
type KindSpec struct {
	Name    string
	Options []Option
	Needs   []string // artifact ids the runbook must declare
	typ     reflect.Type
	build   func(reflect.Value) Kind
}

// Option returns the named option.
func (k KindSpec) Option(name string) (Option, bool) {
	for _, o := range k.Options {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// New builds the kind with its options set from values (option name →
// text, each already checked); options not in values take their default.
func (k KindSpec) New(values map[string]string) (Kind, error) {
	opts := reflect.New(k.typ).Elem()
	var errs []error
	for _, o := range k.Options {
		v, ok := values[o.Name]
		if !ok {
			if !o.HasDefault {
				errs = append(errs, fmt.Errorf("step kind %s: option %s (%s) is required", k.Name, o.Name, o.Type))
				continue
			}
			v = o.Default
		}
		x, err := o.Type.parse(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("step kind %s: option %s: %w", k.Name, o.Name, err))
			continue
		}
		f := opts.FieldByIndex(o.field)
		if x == nil {
			continue // a type whose values are interfaces gave none
		}
		f.Set(reflect.ValueOf(x).Convert(f.Type()))
	}
	for name := range values {
		if _, ok := k.Option(name); !ok {
			errs = append(errs, fmt.Errorf("step kind %s has no option %s", k.Name, name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if v, ok := opts.Interface().(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("step kind %s: %w", k.Name, err)
		}
	}
	return k.build(opts), nil
}

// Registry holds the step kinds runbooks may name.
type Registry struct{ kinds map[string]KindSpec }

// NewRegistry is an empty registry; kind packs add their kinds to it.
func NewRegistry() *Registry { return &Registry{kinds: map[string]KindSpec{}} }

// Lookup returns a registered kind.
func (r *Registry) Lookup(name string) (KindSpec, bool) {
	k, ok := r.kinds[name]
	return k, ok
}

// Names lists the registered kinds, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.kinds))
	for n := range r.kinds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Register adds a step kind whose options are the struct O (see Option);
// newKind builds it from options already checked. needs names the artifacts
// it reads or writes. A malformed options struct or a name registered twice
// panics: it is a programming error, found by any test that loads a
// runbook.
func Register[O any](r *Registry, name string, needs []string, newKind func(O) Kind) {
	if _, dup := r.kinds[name]; dup {
		panic("steps: step kind " + name + " registered twice")
	}
	typ := reflect.TypeFor[O]()
	if typ.Kind() != reflect.Struct {
		panic(fmt.Sprintf("steps: options of step kind %s are %s, not a struct", name, typ))
	}
	spec := KindSpec{Name: name, Needs: needs, typ: typ, build: func(v reflect.Value) Kind { return newKind(v.Interface().(O)) }}
	for _, f := range reflect.VisibleFields(typ) {
		on, ok := f.Tag.Lookup("opt")
		if !ok {
			continue
		}
		if _, dup := spec.Option(on); dup {
			panic(fmt.Sprintf("steps: option %s of step kind %s declared twice", on, name))
		}
		o := Option{Name: on, field: f.Index, Type: optionType(name, on, f)}
		o.Default, o.HasDefault = f.Tag.Lookup("default")
		if o.HasDefault {
			if err := o.Type.Check(o.Default); err != nil {
				panic(fmt.Sprintf("steps: option %s of step kind %s: default: %v", on, name, err))
			}
		}
		spec.Options = append(spec.Options, o)
	}
	r.kinds[name] = spec
}

// optionType is the type of option on of step kind kind, the field f: the
// type its type tag names, else the engine's type of its Go type. A tag
// naming no registered type, a type whose values cannot fill the field, and
// a field no engine type fills panic (see Register).
func optionType(kind, on string, f reflect.StructField) ValueType {
	if name, ok := f.Tag.Lookup("type"); ok {
		t, err := ParseValueType(name)
		if err != nil {
			panic(fmt.Sprintf("steps: option %s of step kind %s: %v", on, kind, err))
		}
		if !t.fills(f.Type) {
			panic(fmt.Sprintf("steps: option %s of step kind %s has type %s, which a %s value cannot fill", on, kind, f.Type, t))
		}
		return t
	}
	switch {
	case f.Type.Kind() == reflect.String:
		return TypeString
	case f.Type == reflect.TypeFor[time.Duration]():
		return TypeDuration
	case f.Type.Kind() == reflect.Int:
		return TypeInt
	case f.Type.Kind() == reflect.Bool:
		return TypeBool
	}
	panic(fmt.Sprintf("steps: option %s of step kind %s has type %s, which no runbook value can fill", on, kind, f.Type))
}
