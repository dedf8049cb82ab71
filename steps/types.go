package steps

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ValueType is the type of a runbook parameter and of a kind's option: both
// are written as text (YAML, --set) and checked before anything runs. The
// engine has four, TypeString, TypeInt, TypeBool and TypeDuration; a kind
// pack registers its own (RegisterType), as pflag's Value lets a program add
// a type of flag, so that the engine names no topic, broker or batch.
// A ValueType is a number given at registration: compare it, never store it;
// runbooks and the journal hold its name.
type ValueType int

// valueType is a registered type: its name (a runbook's type:, an option's
// type tag), the Go type of its values, and how a value written as text is
// read.
type valueType struct {
	name   string
	of     reflect.Type
	parse  func(string) (any, error)
	engine bool // one of the engine's own four
}

// types are the registered types, in the order they were registered: the
// engine's four first (this package's variables), then the packs' (their
// packages' variables or init, which Go runs before the packages that
// import them, runbooks and cmd among them).
var types []valueType

// The engine's own types: an option field of a string, int, bool or
// time.Duration type without a type tag takes one of them.
var (
	TypeString   = newType("string", func(v string) (string, error) { return v, nil }, true)
	TypeInt      = newType("int", parseInt, true)      // a whole number
	TypeBool     = newType("bool", parseBool, true)    // true or false
	TypeDuration = newType("duration", parseDur, true) // 30s, 5m
)

// RegisterType adds the type name, whose values are Ts read by parse from
// the text a runbook or --set gives; parse's error says what the text
// should be. Runbook parameters may then be of type name, and kind options
// of a Go type a T converts to may name it in their type tag
// (`type:"name"`). A type whose values are strings (a topic name) may also
// fill a string option. A pack calls RegisterType while its package is
// initialized (a package variable, or init), so that every type is known
// before a runbook is read; a name registered twice panics, as a
// programming error.
func RegisterType[T any](name string, parse func(string) (T, error)) ValueType {
	return newType(name, parse, false)
}

func newType[T any](name string, parse func(string) (T, error), engine bool) ValueType {
	if name == "" || slices.ContainsFunc(types, func(t valueType) bool { return t.name == name }) {
		panic(fmt.Sprintf("steps: value type %q registered twice, or without a name", name))
	}
	types = append(types, valueType{name: name, of: reflect.TypeFor[T](), engine: engine, parse: func(v string) (any, error) {
		x, err := parse(v)
		if err != nil {
			return nil, err
		}
		return x, nil
	}})
	return ValueType(len(types) - 1)
}

func (t ValueType) known() bool { return t >= 0 && int(t) < len(types) }

func (t ValueType) String() string {
	if !t.known() {
		return fmt.Sprintf("ValueType(%d)", int(t))
	}
	return types[t].name
}

// ValueTypeNames lists the types by name: each of the engine's types
// followed by the packs' types whose values may fill its options (a topic
// after string), then the packs' other types, in the order they were
// registered.
func ValueTypeNames() []string {
	var out []string
	for i, e := range types {
		if !e.engine {
			continue
		}
		out = append(out, e.name)
		for j, p := range types {
			if !p.engine && ValueType(i).Accepts(ValueType(j)) {
				out = append(out, p.name)
			}
		}
	}
	for _, p := range types {
		if !p.engine && !slices.Contains(out, p.name) {
			out = append(out, p.name)
		}
	}
	return out
}

// ParseValueType reads a type's name.
func ParseValueType(s string) (ValueType, error) {
	for i, t := range types {
		if t.name == s {
			return ValueType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown type %q (known: %s)", s, strings.Join(ValueTypeNames(), ", "))
}

// Accepts reports whether a value of type from may fill an option of type
// t: the same type, or, for a string option, any type whose values are
// strings (a topic).
func (t ValueType) Accepts(from ValueType) bool {
	return t == from || t == TypeString && from.known() && types[from].of.Kind() == reflect.String
}

// Check checks a value, as written, against the type.
func (t ValueType) Check(v string) error {
	_, err := t.parse(v)
	return err
}

func (t ValueType) parse(v string) (any, error) {
	if !t.known() {
		return nil, fmt.Errorf("unknown type %d", int(t))
	}
	return types[t].parse(v)
}

// fills reports whether the type's values can be set on a field of type f:
// of the same kind (a string, an int, a slice), and convertible to it.
func (t ValueType) fills(f reflect.Type) bool {
	of := types[t].of
	return of.Kind() == f.Kind() && of.ConvertibleTo(f)
}

func parseInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number", v)
	}
	return n, nil
}

func parseBool(v string) (bool, error) {
	if v != "true" && v != "false" {
		return false, fmt.Errorf("%q is not true or false", v)
	}
	return v == "true", nil
}

func parseDur(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration such as 30s or 5m", v)
	}
	return d, nil
}
