package runbooks

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/internal/strictyaml"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// testKinds stands for the step kinds kremedy has: the same names, and
// options only where a test says so.
var testKinds = func() *steps.Registry {
	r := steps.NewRegistry()
	for _, k := range []string{"preflight", "detach-clients", "delete-znodes", "stop-brokers", "start-brokers"} {
		steps.Register(r, k, nil, func(struct{}) steps.Kind { return nil })
	}
	steps.Register(r, "verify-topic", []string{"offsets"}, func(struct{}) steps.Kind { return nil })
	steps.Register(r, "wipe-segments", nil, func(wipeOpts) steps.Kind { return nil })
	return r
}()

// wipeOpts are the options of the test's wipe-segments kind.
type wipeOpts struct {
	Topic string        `opt:"topic" type:"topic"`
	Wait  time.Duration `opt:"wait" default:"10s"`
	IDs   []int32       `opt:"brokers" type:"brokers" default:""`
}

func known(kind string) bool { _, ok := testKinds.Lookup(kind); return ok }

// valid is a small valid runbook. Its line numbers matter to the table
// below: 1 name, 2 summary, 5 mode, 6 confirm, 10 params[0], 14 params[1],
// 17 steps, 18 steps[0], 26 steps[1], 33 with, 35 rollback, 36-37 its
// template.
const valid = `name: topic-cleanup
summary: Remove a topic that will not die
description: |
  A longer text.
mode: zookeeper
confirm:
  word: "{{.topic}}"
  noun: topic
params:
  - name: topic
    type: topic
    required: true
    description: the topic to remove
  - name: recreate
    type: bool
    default: false
steps:
  - id: preflight
    kind: preflight
    title: What kremedy sees before anything happens
    why: |
      Nothing changes yet.
    risk: read-only
    confirm: none
    timeout: 10m
  - id: wipe
    kind: wipe-segments
    title: Wipe the topic's segments
    why: |
      The brokers are stopped.
    risk: destructive
    confirm: typed
    with:
      topic: $topic
    rollback: |
      Move {{ .run_dir }} back into {{ .report }}.
      Then start the brokers.
`

// edit replaces old, which must occur in valid, with new.
func edit(old, new string) string {
	if !strings.Contains(valid, old) {
		panic("edit: " + old + " is not in valid")
	}
	return strings.Replace(valid, old, new, 1)
}

func TestParseValid(t *testing.T) {
	rb, err := Parse("t.yaml", []byte(valid), testKinds)
	if err != nil {
		t.Fatal(err)
	}
	want := &Runbook{
		Name:        "topic-cleanup",
		Summary:     "Remove a topic that will not die",
		Description: "A longer text.\n",
		Mode:        "zookeeper",
		ConfirmWord: "{{.topic}}",
		ConfirmNoun: "topic",
		Params: []Param{
			{Name: "topic", Type: "topic", Required: true, Description: "the topic to remove"},
			{Name: "recreate", Type: "bool", Default: "false", HasDefault: true},
		},
		Steps: []StepSpec{
			{ID: "preflight", Kind: "preflight", Title: "What kremedy sees before anything happens",
				Why: "Nothing changes yet.\n", Risk: "read-only", Confirm: "none", Timeout: 10 * time.Minute, Line: 18, With: map[string]string{}},
			{ID: "wipe", Kind: "wipe-segments", Title: "Wipe the topic's segments", Why: "The brokers are stopped.\n",
				Risk: "destructive", Confirm: "typed", Line: 26, With: map[string]string{"topic": "$topic"},
				Rollback: "Move {{ .run_dir }} back into {{ .report }}.\nThen start the brokers.\n"},
		},
		File:  "t.yaml",
		kinds: testKinds,
	}
	if !reflect.DeepEqual(rb, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", rb, want)
	}
}

type parseCase struct {
	name string
	in   string
	// want holds one entry per expected error, in file order: the exact
	// "file:line:col: " prefix and a part of the message.
	want []string
}

var parseCases = []parseCase{
	{name: "valid", in: valid},
	{name: "no params, no description, comments first", in: "# a comment\n" + strings.NewReplacer("{{.topic}}", "{{.cluster}}", "topic: $topic", "topic: orders",
		valid[strings.Index(valid, "description:"):strings.Index(valid, "confirm:")], "mode: zookeeper\n",
		valid[strings.Index(valid, "params:"):strings.Index(valid, "steps:")], "").Replace(valid)},
	{name: "low risk with yes and a plain rollback", in: edit("risk: destructive\n    confirm: typed", "risk: low\n    confirm: yes")},
	{name: "params with every type", in: edit("  - name: recreate\n", "  - name: count\n    type: int\n    default: 3\n"+
		"  - name: wait\n    type: duration\n    default: 30s\n  - name: note\n    type: string\n  - name: other\n    type: topic\n    default: orders\n"+
		"  - name: recreate\n")},

	// Keys and types.
	{name: "unknown top-level key", in: "nmae: x\n" + valid,
		want: []string{`t.yaml:1:1: unknown key "nmae" at the top level; known keys there are artifacts, confirm, description, mode, name, next, params, steps, summary`}},
	{name: "misspelt step key: unknown, and the key it should be is missing", in: edit("    risk: read-only", "    riks: read-only"),
		want: []string{
			"t.yaml:18:5: steps[0].risk is required: one of read-only, low, destructive",
			`t.yaml:23:5: unknown key "riks" in steps[0]; known keys there are confirm, id, kind, risk, rollback, timeout, title, why, window, with`,
		}},
	{name: "a window of one step", in: edit("timeout: 10m", "timeout: 10m\n    window: outage"),
		want: []string{`t.yaml:26:13: steps[0].window "outage" holds only step preflight: a window groups two or more consecutive steps`}},
	{name: "upper-case key", in: edit("mode: zookeeper", "Mode: zookeeper"),
		want: []string{"t.yaml:1:1: mode is required", `t.yaml:5:1: unknown key "Mode" at the top level`}},
	{name: "timeout without unit", in: edit("timeout: 10m", "timeout: 10"),
		want: []string{"t.yaml:25:14: steps[0].timeout needs a unit, such as 10s or 1m"}},
	{name: "negative timeout", in: edit("timeout: 10m", "timeout: -1m"),
		want: []string{`t.yaml:25:14: steps[0].timeout is "-1m"; it must be a positive duration`}},
	{name: "required: yes is not a bool", in: edit("required: true", "required: yes"),
		want: []string{"t.yaml:12:15: params[0].required must be true or false, not text"}},
	{name: "list where text belongs", in: edit("title: Wipe the topic's segments", "title: [a, b]"),
		want: []string{"t.yaml:28:12: steps[1].title must be text, not a list"}},
	{name: "steps as a mapping", in: valid[:strings.Index(valid, "steps:")] + "steps:\n  id: x\n",
		want: []string{"t.yaml:18:5: steps must be a list, not a mapping"}},
	{name: "a step that is a number", in: valid + "  - 5\n",
		want: []string{"t.yaml:38:5: steps[2] must be a mapping of keys to values, not a number"}},
	{name: "an empty step", in: valid + "  -\n",
		want: []string{"t.yaml:38:3: steps[2] is empty; a step needs at least id, kind, title, why, risk and confirm"}},
	{name: "top level is a list", in: "- a\n- b\n",
		want: []string{"t.yaml:1:1: the runbook must be a mapping of keys to values, not a list"}},

	// Required keys: at the mapping that lacks them.
	{name: "a null document", in: "~\n",
		want: []string{"t.yaml:1:1: name is required", "t.yaml:1:1: summary is required", "t.yaml:1:1: mode is required", "t.yaml:1:1: confirm is required", "t.yaml:1:1: steps is required"}},
	{name: "missing summary", in: edit("summary: Remove a topic that will not die\n", ""),
		want: []string{"t.yaml:1:1: summary is required: one line"}},
	{name: "missing name after a comment", in: "# runbook\n" + edit("name: topic-cleanup\n", ""),
		want: []string{"t.yaml:2:1: name is required"}},
	{name: "missing steps", in: valid[:strings.Index(valid, "steps:")],
		want: []string{"t.yaml:1:1: steps is required: a runbook needs at least one step"}},
	{name: "empty steps", in: valid[:strings.Index(valid, "steps:")] + "steps: []\n",
		want: []string{"t.yaml:17:1: steps is empty: a runbook needs at least one step"}},
	{name: "step without kind", in: edit("    kind: preflight\n", ""),
		want: []string{"t.yaml:18:5: steps[0].kind is required"}},
	{name: "step without why", in: edit("    why: |\n      Nothing changes yet.\n", ""),
		want: []string{"t.yaml:18:5: steps[0].why is required: the training note"}},
	{name: "empty why", in: edit("    why: |\n      Nothing changes yet.\n", "    why: \"  \"\n"),
		want: []string{"t.yaml:21:10: steps[0].why is empty: the training note"}},
	{name: "null title", in: edit("title: What kremedy sees before anything happens", "title:"),
		want: []string{"t.yaml:20:5: steps[0].title is empty"}},
	{name: "param without type", in: edit("    type: bool\n", ""),
		want: []string{"t.yaml:14:5: params[1].type is required: one of string, topic, int, bool, duration, brokers, topics, batch"}},
	{name: "mutating step without rollback", in: valid[:strings.Index(valid, "    rollback:")],
		want: []string{"t.yaml:26:5: steps[1].rollback is required: a step that changes the cluster says how to undo it"}},
	{name: "mutating step with an empty rollback", in: valid[:strings.Index(valid, "    rollback:")] + "    rollback: \"\"\n",
		want: []string{"t.yaml:35:15: steps[1].rollback is empty"}},

	// Values.
	{name: "bad name", in: edit("name: topic-cleanup", "name: Topic_Cleanup"),
		want: []string{`t.yaml:1:7: name "Topic_Cleanup" may hold only lower-case letters, digits and '-'`}},
	{name: "summary too long", in: edit("summary: Remove a topic that will not die", "summary: "+strings.Repeat("x", 101)),
		want: []string{"t.yaml:2:10: summary is 101 characters long; keep it to 100"}},
	{name: "summary on two lines", in: edit("summary: Remove a topic that will not die", "summary: |\n  a\n  b"),
		want: []string{"t.yaml:2:10: summary contains a line break (U+000A)"}},
	{name: "mode unknown", in: edit("mode: zookeeper", "mode: kraf"),
		want: []string{`t.yaml:5:7: mode "kraf" is not one of zookeeper, kraft`}},
	{name: "bad param name", in: edit("name: topic\n", "name: Topic\n"),
		want: []string{`t.yaml:10:11: params[0].name "Topic" may hold only lower-case letters and '_'`}},
	{name: "duplicate param name", in: edit("name: recreate", "name: topic"),
		want: []string{`t.yaml:14:11: params[1].name "topic" is also used by params[0]; parameter names are unique`}},
	{name: "bad param type", in: edit("type: bool", "type: boolean"),
		want: []string{`t.yaml:15:11: params[1].type "boolean" is not one of string, topic, int, bool, duration, brokers, topics, batch`}},
	{name: "default that is not of the type", in: edit("default: false", "default: maybe"),
		want: []string{`t.yaml:16:14: params[1].default: "maybe" is not true or false`}},
	{name: "default that is not a topic", in: edit("type: bool\n    default: false", "type: topic\n    default: a;b"),
		want: []string{`t.yaml:16:14: params[1].default: invalid topic name "a;b"`}},
	{name: "required parameter with a default", in: edit("    required: true\n", "    required: true\n    default: orders\n"),
		want: []string{"t.yaml:13:14: params[0].default: a required parameter has no default"}},
	{name: "bad step id", in: edit("id: wipe", "id: Wipe!"),
		want: []string{`t.yaml:26:9: steps[1].id "Wipe!" may hold only lower-case letters, digits and '-'`}},
	{name: "duplicate step id", in: edit("id: wipe", "id: preflight"),
		want: []string{`t.yaml:26:9: steps[1].id "preflight" is also used by steps[0]; step ids are unique`}},
	{name: "unknown kind lists the known ones", in: edit("kind: wipe-segments", "kind: wipe-everything"),
		want: []string{`t.yaml:27:11: steps[1].kind "wipe-everything" is not a step kind kremedy knows; the step kinds kremedy knows are ` +
			"delete-znodes, detach-clients, preflight, start-brokers, stop-brokers, verify-topic, wipe-segments"}},
	{name: "bad risk", in: edit("risk: read-only", "risk: safe"),
		want: []string{`t.yaml:23:11: steps[0].risk "safe" is not one of read-only, low, destructive`}},
	{name: "bad confirm", in: edit("confirm: none", "confirm: enter"),
		want: []string{`t.yaml:24:14: steps[0].confirm "enter" is not one of none, yes, typed`}},
	{name: "destructive step confirmed with yes", in: edit("confirm: typed", "confirm: yes"),
		want: []string{"t.yaml:32:14: steps[1].confirm is yes, but the step is destructive: it needs confirm: typed"}},
	{name: "destructive step without confirmation", in: edit("confirm: typed", "confirm: none"),
		want: []string{"t.yaml:32:14: steps[1].confirm is none, but the step is destructive"}},
	{name: "read-only step that asks", in: edit("confirm: none", "confirm: yes"),
		want: []string{"t.yaml:24:14: steps[0].confirm is yes, but the step is read-only"}},
	{name: "template error on its first line", in: edit("{{ .report }}", "{{ .report }"),
		want: []string{`t.yaml:36:7: steps[1].rollback is not a valid text/template: unexpected "}" in operand`}},
	{name: "template error on its second line", in: edit("Then start the brokers.", "Then {{ if }} start."),
		want: []string{"t.yaml:37:7: steps[1].rollback is not a valid text/template: missing value for if"}},
	{name: "unclosed action names file lines", in: edit("Then start the brokers.", "Then {{ .x"),
		want: []string{"t.yaml:37:7: steps[1].rollback is not a valid text/template: unclosed action started at line 37"}},
	{name: "undefined template function", in: edit("{{ .report }}", "{{ quote .report }}"),
		want: []string{`t.yaml:36:7: steps[1].rollback is not a valid text/template: function "quote" not defined`}},
	{name: "template in a quoted scalar", in: valid[:strings.Index(valid, "    rollback:")] + "    rollback: \"x {{ end }}\"\n",
		want: []string{"t.yaml:35:15: steps[1].rollback is not a valid text/template: unexpected {{end}}"}},
	{name: "bidi override in a training note", in: edit("The brokers are stopped.", "The brokers are \u202estopped."),
		want: []string{"t.yaml:29:10: steps[1].why contains an invisible formatting character (U+202E)"}},

	// Options, artifacts, the confirmation and templates.
	{name: "unknown option", in: edit("      topic: $topic\n", "      topic: $topic\n      tpoic: x\n"),
		want: []string{`t.yaml:35:7: unknown key "tpoic" in steps[1].with; known keys there are brokers, topic, wait`}},
	{name: "option literal of the wrong type", in: edit("      topic: $topic\n", "      topic: $topic\n      wait: 10\n"),
		want: []string{`t.yaml:35:13: steps[1].with.wait: option wait (duration): "10" is not a duration`}},
	{name: "option literal that is not a topic", in: edit("topic: $topic", "topic: a;b"),
		want: []string{`t.yaml:34:14: steps[1].with.topic: option topic (topic): invalid topic name "a;b"`}},
	{name: "option of an undeclared parameter", in: edit("topic: $topic", "topic: $topc"),
		want: []string{"t.yaml:34:14: steps[1].with.topic refers to parameter topc, which the runbook does not declare; its parameters are recreate, topic"}},
	{name: "option of a parameter of another type", in: edit("topic: $topic", "topic: $recreate"),
		want: []string{"t.yaml:34:14: steps[1].with.topic: option topic is a topic, but parameter recreate is a bool"}},
	{name: "required option missing", in: edit("    with:\n      topic: $topic\n", ""),
		want: []string{"t.yaml:26:5: step wipe: kind wipe-segments needs option topic (topic) in with:"}},
	{name: "with on a kind without options", in: edit("    timeout: 10m\n", "    timeout: 10m\n    with:\n      topic: x\n"),
		want: []string{"t.yaml:26:5: steps[0].with: step kind preflight has no options"}},
	{name: "kind needs an undeclared artifact", in: valid + "  - id: verify\n    kind: verify-topic\n    title: v\n    why: w\n    risk: low\n    confirm: \"yes\"\n    rollback: r\n",
		want: []string{`t.yaml:38:5: step verify: kind verify-topic writes or reads the artifact "offsets", which the runbook does not declare under artifacts`}},
	{name: "artifact outside the run directory", in: valid + "artifacts:\n  - id: backup\n    what: a backup\n    path: ../../etc/passwd\n",
		want: []string{`t.yaml:41:11: artifacts[0].path "../../etc/passwd" must be a clean path inside the run directory`}},
	{name: "artifact with an absolute path and a bad id", in: valid + "artifacts:\n  - id: Backup\n    what: a backup\n    path: /etc/passwd\n",
		want: []string{`t.yaml:39:9: artifacts[0].id "Backup" may hold only lower-case letters and '_'`, `t.yaml:41:11: artifacts[0].path "/etc/passwd" must be a clean path`}},
	{name: "two artifacts with one id", in: valid + "artifacts:\n  - {id: b, what: x, path: b.json}\n  - {id: b, what: y, path: c.json}\n",
		want: []string{`t.yaml:40:10: artifacts[1].id "b" is also used by artifacts[0]; artifact ids are unique`}},
	{name: "rollback names an unknown value", in: edit("Then start the brokers.", "Then start {{ .brokers }}."),
		want: []string{"t.yaml:37:7: steps[1].rollback: {{.brokers}} is neither a parameter nor an artifact of the runbook (it may use cluster, inventory, recreate, report, run_dir, topic)"}},
	{name: "next names an unknown value", in: valid + "next:\n  - \"reattach {{.topics}}\"\n",
		want: []string{"t.yaml:39:5: next[0]: {{.topics}} is neither a parameter nor an artifact"}},
	{name: "confirmation word of an unknown value", in: edit(`word: "{{.topic}}"`, `word: "{{.name}}"`),
		want: []string{"t.yaml:7:9: confirm.word: {{.name}} is neither a parameter nor an artifact"}},
	{name: "confirmation without its noun", in: edit("  noun: topic\n", ""),
		want: []string{"t.yaml:7:3: confirm.noun is required"}},

	// YAML the strict decoder refuses.
	{name: "duplicate key", in: edit("    kind: preflight\n", "    kind: preflight\n    kind: verify-topic\n"),
		want: []string{`t.yaml:20:5: mapping key "kind" already defined at [19:5]`}},
	{name: "anchor and alias", in: edit("    title: Wipe the topic's segments\n", "    title: &t Wipe\n") + "  - id: again\n    title: *t\n",
		want: []string{
			"t.yaml:28:12: steps[1].title: anchors (&) are not supported in a runbook",
			"t.yaml:38:5: steps[2].kind is required",
			"t.yaml:38:5: steps[2].why is required",
			"t.yaml:38:5: steps[2].risk is required",
			"t.yaml:38:5: steps[2].confirm is required",
			"t.yaml:39:12: steps[2].title: aliases (*) are not supported in a runbook",
		}},
	{name: "tag", in: edit("mode: zookeeper", "mode: !!str zookeeper"),
		want: []string{"t.yaml:5:7: mode: YAML tags (!) are not supported in a runbook"}},
	{name: "tab indentation", in: edit("  - name: topic", "\t- name: topic"),
		want: []string{`t.yaml:10:1: found character '\t' that cannot start any token; YAML indents with spaces, never tabs`}},
	{name: "empty file", in: "",
		want: []string{"t.yaml:1:1: the runbook is empty; it needs at least name, summary, mode, confirm and steps"}},
	{name: "two documents", in: valid + "---\nname: other\n",
		want: []string{"t.yaml:39:5: a second YAML document; a runbook file holds one runbook"}},
	{name: "invalid UTF-8", in: edit("name: topic-cleanup", "name: topic\xff"),
		want: []string{"t.yaml:1:12: the file is not valid UTF-8 text"}},
	{name: "too large", in: valid + strings.Repeat("# padding\n", MaxSize/10),
		want: []string{"t.yaml:1:1: the file is larger than 256 KiB, which no runbook needs"}},
	{name: "nested too deeply", in: "name: " + strings.Repeat("[", 100),
		want: []string{"t.yaml:1:39: YAML nested too deeply for a runbook"}},

	{name: "all errors are collected, in file order", in: "extra: 1\n" +
		edit("type: bool", "type: boolean") + "  - id: verify\n    kind: verify\n    title: [x]\n",
		want: []string{
			`t.yaml:1:1: unknown key "extra" at the top level`,
			`t.yaml:16:11: params[1].type "boolean" is not one of`,
			`t.yaml:39:5: steps[2].why is required`,
			`t.yaml:39:5: steps[2].risk is required`,
			`t.yaml:39:5: steps[2].confirm is required`,
			`t.yaml:40:11: steps[2].kind "verify" is not a step kind kremedy knows`,
			`t.yaml:41:12: steps[2].title must be text, not a list`,
		}},
}

// errorList flattens what Parse returns into its *strictyaml.Error values.
func errorList(t *testing.T, err error) []*strictyaml.Error {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]*strictyaml.Error, len(errs))
	for i, e := range errs {
		if !errors.As(e, &out[i]) {
			t.Fatalf("error %v (%T) is not a *strictyaml.Error", e, e)
		}
	}
	return out
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			rb, err := Parse("t.yaml", []byte(tc.in), testKinds)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse succeeded, want errors:\n%s", strings.Join(tc.want, "\n"))
			}
			if rb != nil {
				t.Error("Parse returned a runbook along with an error")
			}
			got := errorList(t, err)
			var lines []string
			for _, e := range got {
				lines = append(lines, e.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tc.want), strings.Join(lines, "\n"))
			}
			for i, w := range tc.want {
				prefix, part, _ := strings.Cut(w, ": ")
				prefix += ": "
				if !strings.HasPrefix(lines[i], prefix) || !strings.Contains(lines[i][len(prefix):], part) {
					t.Errorf("error %d:\n got: %s\nwant: %s...", i, lines[i], w)
				}
			}
		})
	}
}

func TestParseBuiltinName(t *testing.T) {
	_, err := parse("runbooks/other.yaml", []byte(valid), testKinds, "other")
	want := `runbooks/other.yaml:1:7: name "topic-cleanup" must be "other", the base name of the file, for a built-in runbook`
	if err == nil || err.Error() != want {
		t.Fatalf("parse = %v\nwant %s", err, want)
	}
}

func TestBuiltin(t *testing.T) {
	rbs, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := fs.Glob(builtin, "*.yaml")
	if len(rbs) != len(files) || len(rbs) == 0 {
		t.Fatalf("Builtin returned %d runbooks for %d files", len(rbs), len(files))
	}
	for i, rb := range rbs {
		if i > 0 && rbs[i-1].Name >= rb.Name {
			t.Errorf("runbooks not sorted by name: %s before %s", rbs[i-1].Name, rb.Name)
		}
		if rb.File != "runbooks/"+rb.Name+".yaml" {
			t.Errorf("%s: File = %q", rb.Name, rb.File)
		}
		// Every built-in binds with only its required parameters (and
		// topic, which topic-cleanup needs unless topics is set): every
		// step's options are filled, every template renders.
		set := map[string]string{}
		for _, p := range rb.Params {
			if p.Required || p.Name == "topic" {
				set[p.Name] = map[string]string{"topic": "orders", "int": "1", "bool": "true", "duration": "1s", "brokers": "1", "string": "x"}[p.Type]
			}
		}
		b, err := rb.Bind(set, "lab")
		if err != nil {
			t.Errorf("%s: Bind(%v): %v", rb.Name, set, err)
			continue
		}
		if b.Confirm.Word == "" || b.Confirm.Noun == "" || len(b.Steps) != len(rb.Steps) {
			t.Errorf("%s: bound to %+v", rb.Name, b)
		}
		for _, n := range b.Next {
			if _, err := steps.Render(n, b.TemplateData("/run", "inv.yaml", "lab")); err != nil {
				t.Errorf("%s: next %q: %v", rb.Name, n, err)
			}
		}
		for _, s := range b.Steps {
			if _, err := steps.Render(s.Info.Rollback, b.TemplateData("/run", "inv.yaml", "lab")); err != nil {
				t.Errorf("%s: step %s: rollback: %v", rb.Name, s.Info.ID, err)
			}
		}
	}
	// A runbook may name only kinds the registry has.
	if _, err := Parse("t.yaml", []byte(valid), steps.NewRegistry()); err == nil || !strings.Contains(err.Error(), "kremedy knows no step kinds") {
		t.Errorf("Parse(no kinds) = %v, want an unknown kind error", err)
	}
}

func TestGet(t *testing.T) {
	rb, err := Get("topic-cleanup")
	if err != nil || rb.Name != "topic-cleanup" {
		t.Fatalf("Get(topic-cleanup) = %v, %v", rb, err)
	}
	_, err = Get("topic-cleanpu")
	if !errors.Is(err, ErrUnknownRunbook) || !strings.Contains(err.Error(), "topic-cleanup") {
		t.Fatalf("Get(typo) = %v, want ErrUnknownRunbook listing topic-cleanup", err)
	}
}

// bindRunbook has one parameter of each type.
var bindRunbook = &Runbook{Name: "rb", Params: []Param{
	{Name: "topic", Type: "topic", Required: true},
	{Name: "recreate", Type: "bool", Default: "false", HasDefault: true},
	{Name: "batch", Type: "int", Default: "10", HasDefault: true},
	{Name: "wait", Type: "duration", Default: "30s", HasDefault: true},
	{Name: "note", Type: "string"},
}}

func TestBind(t *testing.T) {
	tests := []struct {
		name string
		set  map[string]string
		want Values
		// wantErr holds a part of each expected message, in order.
		wantErr []string
		isTopic bool // the error also wraps kafkazk.ErrInvalidTopic
	}{
		{name: "defaults", set: map[string]string{"topic": "orders"},
			want: Values{"topic": "orders", "recreate": "false", "batch": "10", "wait": "30s"}},
		{name: "everything set", set: map[string]string{"topic": "orders.v2", "recreate": "true", "batch": "-3", "wait": "1m30s", "note": "a=b c"},
			want: Values{"topic": "orders.v2", "recreate": "true", "batch": "-3", "wait": "1m30s", "note": "a=b c"}},
		{name: "empty string", set: map[string]string{"topic": "t", "note": ""},
			want: Values{"topic": "t", "recreate": "false", "batch": "10", "wait": "30s", "note": ""}},
		{name: "unknown parameter", set: map[string]string{"topic": "t", "topc": "x"},
			wantErr: []string{`invalid runbook parameter "topc": runbook rb has no such parameter; its parameters are topic, recreate, batch, wait, note`}},
		{name: "missing required", set: map[string]string{},
			wantErr: []string{"invalid runbook parameter topic: runbook rb needs it; set it with --set topic=<topic>"}},
		{name: "bad int", set: map[string]string{"topic": "t", "batch": "ten"},
			wantErr: []string{`invalid runbook parameter batch (int): "ten" is not a whole number`}},
		{name: "fractional int", set: map[string]string{"topic": "t", "batch": "1.5"},
			wantErr: []string{`batch (int): "1.5" is not a whole number`}},
		{name: "bad bool", set: map[string]string{"topic": "t", "recreate": "yes"},
			wantErr: []string{`recreate (bool): "yes" is not true or false`}},
		{name: "bad duration", set: map[string]string{"topic": "t", "wait": "10"},
			wantErr: []string{`wait (duration): "10" is not a duration`}},
		{name: "negative duration", set: map[string]string{"topic": "t", "wait": "-1s"},
			wantErr: []string{`wait (duration): "-1s" is not a duration`}},
		{name: "hostile topic", set: map[string]string{"topic": "a;rm -rf /"}, isTopic: true,
			wantErr: []string{`topic (topic): invalid topic name "a;rm -rf /": character ';'`}},
		{name: "topic dot-dot", set: map[string]string{"topic": ".."}, isTopic: true,
			wantErr: []string{`topic (topic): invalid topic name ".."`}},
		{name: "empty topic", set: map[string]string{"topic": ""}, isTopic: true,
			wantErr: []string{"topic (topic): invalid topic name: the name is empty"}},
		{name: "every problem at once", set: map[string]string{"zzz": "1", "aaa": "2", "batch": "x"},
			wantErr: []string{`"aaa": runbook rb has no such parameter`, `"zzz": runbook rb has no such parameter`,
				"topic: runbook rb needs it", `batch (int): "x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bindRunbook.BindParams(tt.set)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Bind: %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Bind = %v, want %v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Bind = %v, want an error", got)
			}
			if !errors.Is(err, ErrInvalidParam) {
				t.Errorf("error does not wrap ErrInvalidParam: %v", err)
			}
			if tt.isTopic != errors.Is(err, kafkazk.ErrInvalidTopic) {
				t.Errorf("errors.Is(err, kafkazk.ErrInvalidTopic) = %v, want %v", !tt.isTopic, tt.isTopic)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.wantErr) {
				t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(tt.wantErr), err)
			}
			for i, w := range tt.wantErr {
				if !strings.Contains(lines[i], w) {
					t.Errorf("error %d:\n got: %s\nwant: ...%s...", i, lines[i], w)
				}
			}
		})
	}
}

func TestValues(t *testing.T) {
	v, err := bindRunbook.BindParams(map[string]string{"topic": "orders", "recreate": "true", "batch": "42", "wait": "2m"})
	if err != nil {
		t.Fatal(err)
	}
	if v.String("topic") != "orders" || !v.Bool("recreate") || v.Int("batch") != 42 || v.Duration("wait") != 2*time.Minute {
		t.Errorf("accessors read %q %v %d %v", v.String("topic"), v.Bool("recreate"), v.Int("batch"), v.Duration("wait"))
	}
	if v.String("note") != "" || v.Int("note") != 0 || v.Bool("note") || v.Duration("note") != 0 {
		t.Error("an unbound key does not read as the zero value")
	}
}

func TestBindParsedDefaults(t *testing.T) {
	rb, err := Parse("t.yaml", []byte(valid), testKinds)
	if err != nil {
		t.Fatal(err)
	}
	v, err := rb.BindParams(map[string]string{"topic": "orders"})
	if err != nil || v.Bool("recreate") || v.String("recreate") != "false" {
		t.Fatalf("Bind = %v, %v; want recreate=false from the default", v, err)
	}
}

func TestParseSet(t *testing.T) {
	tests := []struct {
		args    []string
		want    map[string]string
		wantErr string
	}{
		{args: nil, want: map[string]string{}},
		{args: []string{"topic=orders", "note=a=b", "empty="}, want: map[string]string{"topic": "orders", "note": "a=b", "empty": ""}},
		{args: []string{"topic"}, wantErr: `--set "topic" has no '='`},
		{args: []string{"=orders"}, wantErr: `--set "=orders" has no name before '='`},
		{args: []string{"topic=a", "topic=b"}, wantErr: `topic is set twice ("a" and "b")`},
	}
	for _, tt := range tests {
		got, err := ParseSet(tt.args)
		if tt.wantErr != "" {
			if err == nil || !errors.Is(err, ErrInvalidParam) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSet(%q) = %v, %v; want an error with %q", tt.args, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseSet(%q) = %v, %v; want %v", tt.args, got, err, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		if len(tc.in) < 4096 {
			f.Add([]byte(tc.in))
		}
	}
	files, _ := fs.Glob(builtin, "*.yaml")
	for _, name := range files {
		data, _ := builtin.ReadFile(name)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rb, err := Parse("fuzz.yaml", data, testKinds)
		if err != nil {
			if rb != nil {
				t.Fatal("Parse returned a runbook along with an error")
			}
			for _, e := range errorList(t, err) {
				if e.File != "fuzz.yaml" || e.Line < 1 || e.Column < 1 {
					t.Fatalf("error without a position: %v", e)
				}
			}
			return
		}
		if len(rb.Steps) == 0 {
			t.Fatal("a runbook without steps parsed")
		}
		ids := map[string]bool{}
		for _, s := range rb.Steps {
			if !known(s.Kind) {
				t.Fatalf("step %q has kind %q, which is not a known kind", s.ID, s.Kind)
			}
			if s.ID == "" || ids[s.ID] {
				t.Fatalf("step id %q is empty or used twice", s.ID)
			}
			ids[s.ID] = true
			if s.Risk == "destructive" && s.Confirm != "typed" {
				t.Fatalf("destructive step %q has confirm %q", s.ID, s.Confirm)
			}
			if s.Risk != "read-only" && strings.TrimSpace(s.Rollback) == "" {
				t.Fatalf("step %q changes the cluster and has no rollback", s.ID)
			}
		}
	})
}
