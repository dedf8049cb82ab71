package steps

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

// ValueType is the type of a runbook parameter and of a kind's option: both
// are written as text (YAML, --set) and checked before anything runs.
type ValueType int

const (
	TypeString   ValueType = iota
	TypeTopic              // a Kafka topic name (kafkazk.ValidateTopic)
	TypeInt                // a whole number
	TypeBool               // true or false
	TypeDuration           // 30s, 5m
	TypeBrokers            // broker ids, comma-separated; empty means every broker
	TypeTopics             // topic names, comma-separated, or * for every one; empty means none
	TypeBatch              // how many brokers a roll stops at once: 1 (one at a time), N, or auto
)

var valueTypeNames = [...]string{"string", "topic", "int", "bool", "duration", "brokers", "topics", "batch"}

// BatchAuto is a batch value's "auto" as its option reads it: the largest
// batches the stop-safety rule allows.
const BatchAuto = -1

func (t ValueType) String() string {
	if t < 0 || int(t) >= len(valueTypeNames) {
		return fmt.Sprintf("ValueType(%d)", int(t))
	}
	return valueTypeNames[t]
}

// ValueTypeNames lists the types by name.
func ValueTypeNames() []string { return valueTypeNames[:] }

// ParseValueType reads a type's name.
func ParseValueType(s string) (ValueType, error) {
	for i, n := range valueTypeNames {
		if n == s {
			return ValueType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown type %q (known: %s)", s, strings.Join(valueTypeNames[:], ", "))
}

// Accepts reports whether a value of type from may fill an option of type
// t: the same type, or a topic where any string will do.
func (t ValueType) Accepts(from ValueType) bool {
	return t == from || t == TypeString && from == TypeTopic
}

// Check checks a value, as written, against the type.
func (t ValueType) Check(v string) error {
	_, err := t.parse(v)
	return err
}

func (t ValueType) parse(v string) (any, error) {
	switch t {
	case TypeString:
		return v, nil
	case TypeTopic:
		return v, kafkazk.ValidateTopic(v)
	case TypeInt:
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", v)
		}
		return n, nil
	case TypeBool:
		if v != "true" && v != "false" {
			return nil, fmt.Errorf("%q is not true or false", v)
		}
		return v == "true", nil
	case TypeDuration:
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q is not a duration such as 30s or 5m", v)
		}
		return d, nil
	case TypeBrokers:
		return parseBrokers(v)
	case TypeTopics:
		return parseTopics(v)
	case TypeBatch:
		if strings.TrimSpace(v) == "auto" {
			return BatchAuto, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a batch size: 1 (one broker at a time), a number of brokers such as 3, or auto (the largest batches the stop-safety rule allows)", v)
		}
		return n, nil
	}
	return nil, fmt.Errorf("unknown type %d", int(t))
}

func parseBrokers(v string) ([]int32, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var ids []int32
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a list of broker ids such as 1,2,3 (empty: every broker)", v)
		}
		if slices.Contains(ids, int32(n)) {
			return nil, fmt.Errorf("%q names broker %d twice", v, n)
		}
		ids = append(ids, int32(n))
	}
	return ids, nil
}

// AllTopics is the topics value that names every topic ("*").
const AllTopics = "*"

// ParseTopics reads a topics value (TypeTopics): topic names,
// comma-separated, or AllTopics; empty is none.
func ParseTopics(v string) ([]string, error) { return parseTopics(v) }

func parseTopics(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	if strings.TrimSpace(v) == AllTopics {
		return []string{AllTopics}, nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		t := strings.TrimSpace(f)
		if err := kafkazk.ValidateTopic(t); err != nil {
			return nil, fmt.Errorf("%q is not a list of topic names such as orders,payments (or * for every one): %w", v, err)
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("%q names topic %s twice", v, t)
		}
		out = append(out, t)
	}
	return out, nil
}

// Option is one option of a step kind, from its options struct: a field
// tagged `opt:"name"` (in the struct or a struct it embeds), with an optional `default:"..."` and, for a string,
// `type:"topic"`, for an int `type:"batch"`. An option without a default must be given in the
// runbook's `with:`. An options struct with a Validate() error method is
// checked once every option is set (values that only make sense together,
// a string that must be one of a few words).
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
			continue // an empty broker list
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
		o := Option{Name: on, field: f.Index}
		switch {
		case f.Type.Kind() == reflect.String && f.Tag.Get("type") == "topic":
			o.Type = TypeTopic
		case f.Type.Kind() == reflect.String:
			o.Type = TypeString
		case f.Type == reflect.TypeFor[time.Duration]():
			o.Type = TypeDuration
		case f.Type.Kind() == reflect.Int && f.Tag.Get("type") == "batch":
			o.Type = TypeBatch
		case f.Type.Kind() == reflect.Int:
			o.Type = TypeInt
		case f.Type.Kind() == reflect.Bool:
			o.Type = TypeBool
		case f.Type == reflect.TypeFor[[]int32]():
			o.Type = TypeBrokers
		case f.Type == reflect.TypeFor[[]string]():
			o.Type = TypeTopics
		default:
			panic(fmt.Sprintf("steps: option %s of step kind %s has type %s, which no runbook value can fill", on, name, f.Type))
		}
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
