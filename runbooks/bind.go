package runbooks

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/cleanup"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// Values are a runbook's parameters bound to what the operator set, each
// as text that Bind has checked against its type.
type Values map[string]string

// String is the value of k, or "" when k is not bound.
func (v Values) String(k string) string { return v[k] }

// Int is the value of k, or 0 when k is not bound or not an int.
func (v Values) Int(k string) int {
	n, _ := strconv.Atoi(v[k])
	return n
}

// Bool is the value of k, false when k is not bound.
func (v Values) Bool(k string) bool { return v[k] == "true" }

// Duration is the value of k, or 0 when k is not bound or not a duration.
func (v Values) Duration(k string) time.Duration {
	d, _ := time.ParseDuration(v[k])
	return d
}

// Bind binds the values the operator set (ParseSet's result) to the
// runbook's parameters (BindParams) and builds its steps with their
// options: the runbook ready to run on the inventory's cluster, whose name
// fills {{.cluster}}.
func (rb *Runbook) Bind(set map[string]string, cluster string) (*steps.Runbook, error) {
	vals, err := rb.BindParams(set)
	if err != nil {
		return nil, err
	}
	out := &steps.Runbook{Name: rb.Name, Summary: rb.Summary, Params: vals, Next: rb.Next}
	for _, a := range rb.Artifacts {
		out.Artifacts = append(out.Artifacts, steps.Artifact{ID: a.ID, What: a.What, Path: a.Path})
	}
	kinds := rb.kinds
	if kinds == nil {
		kinds = Kinds()
	}
	for _, s := range rb.Steps {
		risk, err := steps.ParseRisk(s.Risk)
		if err != nil {
			return nil, err
		}
		conf, err := steps.ParseConfirm(s.Confirm)
		if err != nil {
			return nil, err
		}
		spec, ok := kinds.Lookup(s.Kind)
		if !ok {
			return nil, fmt.Errorf("runbook %s: step %s: unknown step kind %q", rb.Name, s.ID, s.Kind)
		}
		opts := map[string]string{}
		for name, v := range s.With {
			if ref, ok := strings.CutPrefix(v, "$"); ok {
				if v, ok = vals[ref]; !ok {
					continue // an optional parameter left unset: the option's default
				}
			}
			opts[name] = v
		}
		kind, err := spec.New(opts)
		if err != nil {
			return nil, fmt.Errorf("%w: runbook %s: step %s: %w; nothing was run", ErrInvalidParam, rb.Name, s.ID, err)
		}
		out.Steps = append(out.Steps, steps.Step{Kind: kind, Info: steps.Info{ID: s.ID, Kind: s.Kind, Title: s.Title, Why: s.Why,
			Risk: risk, Confirm: conf, Rollback: s.Rollback, Timeout: s.Timeout, Window: s.Window}})
	}
	// After the steps: a kind's own check of its options says more than a
	// template that misses a parameter.
	word, err := rb.confirmWord(vals, map[string]string{"cluster": cluster})
	if err != nil {
		return nil, err
	}
	noun, err := steps.Render(rb.ConfirmNoun, confirmData(vals, map[string]string{"cluster": cluster}))
	if err != nil {
		return nil, fmt.Errorf("%w: runbook %s: confirm.noun: %w; nothing was run", ErrInvalidParam, rb.Name, err)
	}
	out.Confirm = steps.Confirmation{Word: word, Noun: noun}
	return out, nil
}

// WordFor is the confirmation word the operator types for a run with
// these parameters, when the parameters alone decide it; ok is false when it
// also needs the inventory (the cluster's name).
func (rb *Runbook) WordFor(vals Values) (word string, ok bool) {
	w, err := rb.confirmWord(vals, nil)
	return w, err == nil
}

func (rb *Runbook) confirmWord(vals Values, extra map[string]string) (string, error) {
	word, err := steps.Render(rb.ConfirmWord, confirmData(vals, extra))
	if err != nil {
		return "", fmt.Errorf("%w: runbook %s: confirm.word: %w; nothing was run", ErrInvalidParam, rb.Name, err)
	}
	if word == "" {
		return "", fmt.Errorf("%w: runbook %s: the confirmation word (%s) is empty; nothing was run", ErrInvalidParam, rb.Name, rb.ConfirmWord)
	}
	return word, nil
}

// BindParams checks the values the operator set (ParseSet's result) against
// the runbook's parameters and fills in defaults. An unknown name, a missing
// required parameter and a value that is not of its parameter's type are
// errors wrapping ErrInvalidParam, all of them joined; a bad topic name
// also wraps kafkazk.ErrInvalidTopic, and a topic internal to Kafka is
// refused. A parameter that is neither set nor has a default is not in the
// result.
func (rb *Runbook) BindParams(set map[string]string) (Values, error) {
	var errs []error
	names := make([]string, len(rb.Params))
	for i, p := range rb.Params {
		names[i] = p.Name
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !slices.Contains(names, k) {
			known := "it has no parameters"
			if len(names) > 0 {
				known = "its parameters are " + strings.Join(names, ", ")
			}
			errs = append(errs, fmt.Errorf("%w %q: runbook %s has no such parameter; %s; nothing was run", ErrInvalidParam, k, rb.Name, known))
		}
	}
	vals := Values{}
	for _, p := range rb.Params {
		v, ok := set[p.Name]
		switch {
		case ok:
			if err := checkValue(p.Type, v); err != nil {
				errs = append(errs, fmt.Errorf("%w %s (%s): %w; nothing was run", ErrInvalidParam, p.Name, p.Type, err))
				continue
			}
		case p.HasDefault:
			v = p.Default
		case p.Required:
			errs = append(errs, fmt.Errorf("%w %s: runbook %s needs it; set it with --set %s=<%s>; nothing was run",
				ErrInvalidParam, p.Name, rb.Name, p.Name, p.Type))
			continue
		default:
			continue
		}
		vals[p.Name] = v
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return vals, nil
}

// ParseSet reads --set arguments, each name=value (the value may hold '='
// and may be empty). A missing '=', an empty name and a name set twice are
// errors wrapping ErrInvalidParam.
func ParseSet(args []string) (map[string]string, error) {
	set := make(map[string]string, len(args))
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: --set %q has no '='; write name=value, such as --set topic=orders", ErrInvalidParam, a)
		case k == "":
			return nil, fmt.Errorf("%w: --set %q has no name before '='; write name=value, such as --set topic=orders", ErrInvalidParam, a)
		}
		if prev, dup := set[k]; dup {
			return nil, fmt.Errorf("%w: %s is set twice (%q and %q); set it once", ErrInvalidParam, k, prev, v)
		}
		set[k] = v
	}
	return set, nil
}

// checkValue checks a parameter's value, as written, against its type.
func checkValue(typ, v string) error {
	t, err := steps.ParseValueType(typ)
	if err != nil {
		return err
	}
	if err := t.Check(v); err != nil {
		return err
	}
	if t == cleanup.TypeTopic && kafkazk.IsInternalTopic(v) {
		return fmt.Errorf("topic %q is internal to Kafka (its name starts with __); kremedy refuses to repair it by a generic runbook", v)
	}
	return nil
}

// confirmData is what confirm.word and confirm.noun are rendered with: the
// parameters and extra (the cluster's name).
func confirmData(vals Values, extra map[string]string) map[string]string {
	data := map[string]string{}
	for k, v := range vals {
		data[k] = v
	}
	for k, v := range extra {
		data[k] = v
	}
	return data
}
