package steps_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/cleanup"
	"github.com/kremedy/kremedy/steps/roll"
)

// pct is the values of a type this test registers as a pack would: a whole
// percentage written "50%".
type pct int

var typePercent = steps.RegisterType("percent", func(v string) (pct, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(v, "%"))
	if err != nil || !strings.HasSuffix(v, "%") || n < 0 || n > 100 {
		return 0, fmt.Errorf("%q is not a percentage such as 50%%", v)
	}
	return pct(n), nil
})

// shareOpts are the options of a kind whose option takes the registered
// type by its type tag.
type shareOpts struct {
	Share pct `opt:"share" type:"percent" default:"10%"`
}

// TestRegisteredTypeParses: a type a pack registers is known by its name,
// checks values with the pack's parse (and its message), fills a kind's
// option by the option's type tag, default included, and is listed after
// the engine's own types and the types this binary's packs registered, in
// that order; an unknown name is refused with that list.
func TestRegisteredTypeParses(t *testing.T) {
	if got, err := steps.ParseValueType("percent"); err != nil || got != typePercent || got.String() != "percent" {
		t.Fatalf("ParseValueType(percent) = %v, %v; want %v", got, err, typePercent)
	}
	if err := typePercent.Check("50%"); err != nil {
		t.Errorf("50%%: %v", err)
	}
	if err := typePercent.Check("half"); err == nil || err.Error() != `"half" is not a percentage such as 50%` {
		t.Errorf("half: %v", err)
	}

	r := steps.NewRegistry()
	var got shareOpts
	steps.Register(r, "share", nil, func(o shareOpts) steps.Kind { got = o; return &fakeKind{} })
	spec, _ := r.Lookup("share")
	if o, ok := spec.Option("share"); !ok || o.Type != typePercent {
		t.Fatalf("option share: %+v", o)
	}
	for _, tc := range []struct {
		with map[string]string
		want pct
	}{{map[string]string{"share": "75%"}, 75}, {nil, 10}} {
		if _, err := spec.New(tc.with); err != nil || got.Share != tc.want {
			t.Errorf("New(%v): share %d, %v; want %d", tc.with, got.Share, err, tc.want)
		}
	}
	if _, err := spec.New(map[string]string{"share": "150%"}); err == nil || err.Error() != `step kind share: option share: "150%" is not a percentage such as 50%` {
		t.Errorf("150%%: %v", err)
	}

	want := []string{"string", "topic", "int", "bool", "duration", "brokers", "topics", "batch", "percent"}
	if names := steps.ValueTypeNames(); !slices.Equal(names, want) {
		t.Errorf("ValueTypeNames() = %v, want %v", names, want)
	}
	_, err := steps.ParseValueType("colour")
	if wantErr := `unknown type "colour" (known: string, topic, int, bool, duration, brokers, topics, batch, percent)`; err == nil || err.Error() != wantErr {
		t.Errorf("ParseValueType(colour) = %v, want %s", err, wantErr)
	}
}

// TestAcceptsByValues: a string option takes a parameter of any type whose
// values are strings (a topic), never one whose values are not; other
// options take their own type only (an int option is no batch).
func TestAcceptsByValues(t *testing.T) {
	for _, tc := range []struct {
		opt, param steps.ValueType
		want       bool
	}{
		{steps.TypeString, cleanup.TypeTopic, true},
		{steps.TypeString, steps.TypeString, true},
		{cleanup.TypeTopic, cleanup.TypeTopic, true},
		{cleanup.TypeTopic, steps.TypeString, false},
		{steps.TypeString, steps.TypeInt, false},
		{steps.TypeString, roll.TypeTopics, false},
		{steps.TypeString, typePercent, false},
		{steps.TypeInt, roll.TypeBatch, false},
		{steps.TypeInt, typePercent, false},
		{roll.TypeBatch, roll.TypeBatch, true},
	} {
		if got := tc.opt.Accepts(tc.param); got != tc.want {
			t.Errorf("%s option accepts a %s parameter: %v, want %v", tc.opt, tc.param, got, tc.want)
		}
	}
}

// TestRegisterRefusesWhatNoTypeFills: a type tag naming no registered type,
// a registered type whose values cannot fill the field, a field no engine
// type fills without a tag, and a type name registered twice are
// programming errors: they panic, saying which.
func TestRegisterRefusesWhatNoTypeFills(t *testing.T) {
	type (
		unknownTag struct {
			C string `opt:"c" type:"colour"`
		}
		wrongField struct {
			B string `opt:"b" type:"batch"`
		}
		untagged struct {
			IDs []int32 `opt:"ids"`
		}
	)
	for _, tc := range []struct {
		name string
		do   func()
		want string
	}{
		{"unknown tag", func() { steps.Register(steps.NewRegistry(), "k", nil, func(unknownTag) steps.Kind { return nil }) },
			`steps: option c of step kind k: unknown type "colour" (known: string, topic, int, bool, duration, brokers, topics, batch, percent)`},
		{"wrong field", func() { steps.Register(steps.NewRegistry(), "k", nil, func(wrongField) steps.Kind { return nil }) },
			"steps: option b of step kind k has type string, which a batch value cannot fill"},
		{"untagged", func() { steps.Register(steps.NewRegistry(), "k", nil, func(untagged) steps.Kind { return nil }) },
			"steps: option ids of step kind k has type []int32, which no runbook value can fill"},
		{"twice", func() { steps.RegisterType("batch", func(v string) (string, error) { return v, nil }) },
			`steps: value type "batch" registered twice, or without a name`},
	} {
		if got := panicOf(tc.do); got != tc.want {
			t.Errorf("%s: panic %q, want %q", tc.name, got, tc.want)
		}
	}
}

// panicOf runs f and returns what it panicked with, "" when it did not.
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
