package journal

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	// escaped is how encoding/json writes s inside a string.
	escaped := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	}
	tests := []struct {
		name     string
		secrets  []string
		step     string
		data     any
		wantStep string
		wantData string // the data as written
		hidden   []string
	}{
		{
			name:     "password in a command",
			secrets:  []string{"hunter2!"},
			data:     map[string]string{"cmd": "kafka-configs --password hunter2! --alter"},
			wantData: `{"cmd":"kafka-configs --password [redacted] --alter"}`,
			hidden:   []string{"hunter2!"},
		},
		{
			name:     "secret that JSON escapes",
			secrets:  []string{`p"a\ss<w>&rd`},
			data:     struct{ Out string }{"line1\np\"a\\ss<w>&rd\tend"},
			wantData: `{"Out":"line1\n[redacted]\tend"}`,
			hidden:   []string{`p"a\ss<w>&rd`, escaped(`p"a\ss<w>&rd`), `p\"a\\ss`},
		},
		{
			name:     "secret written with \\u escapes in raw data",
			secrets:  []string{"tok3n"},
			data:     json.RawMessage(`{"auth":"Bearer \u0074ok3n"}`),
			wantData: `{"auth":"Bearer [redacted]"}`,
			hidden:   []string{"tok3n", `\u0074ok3n`},
		},
		{
			name:     "secret in step, key and number",
			secrets:  []string{"s3cret", "123456"},
			step:     "login-s3cret",
			data:     json.RawMessage(`{"s3cret-key":[1,123456789,{"pin":123456}],"ok":true,"n":null,"f":1.5e3}`),
			wantStep: "login-[redacted]",
			wantData: `{"[redacted]-key":[1,"[redacted]",{"pin":"[redacted]"}],"ok":true,"n":null,"f":1.5e3}`,
			hidden:   []string{"s3cret", "123456"},
		},
		{
			name:     "overlapping secrets leave no part behind",
			secrets:  []string{"abcd", "cdefgh"},
			data:     "xxabcdefghyy abcdabcd",
			wantData: `"xx[redacted]yy [redacted]"`,
			hidden:   []string{"abcd", "cdefgh", "efgh"},
		},
		{
			name:     "short and empty secrets are ignored",
			secrets:  []string{"", "a", "abc"},
			step:     "abc",
			data:     "a abc",
			wantStep: "abc",
			wantData: `"a abc"`,
		},
		{
			name:     "secret that looks like a field name does not break the line",
			secrets:  []string{"data", "seq\":"},
			data:     map[string]string{"data": `seq":1`},
			wantData: `{"[redacted]":"[redacted]1"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			j := mustCreate(t, path)
			before := mustAppend(t, j, Note, tc.step, tc.data)
			j.Redact(tc.secrets...)
			rec := mustAppend(t, j, Note, tc.step, tc.data)
			if tc.wantStep == "" {
				tc.wantStep = tc.step
			}
			if rec.Step != tc.wantStep || string(rec.Data) != tc.wantData {
				t.Fatalf("Append wrote step %q data %s\nwant step %q data %s", rec.Step, rec.Data, tc.wantStep, tc.wantData)
			}
			recs := mustRead(t, path)
			if len(recs) != 2 || !sameRecord(recs[1], rec) {
				t.Fatalf("Read: %+v, want the redacted record %+v", recs, rec)
			}
			if !sameRecord(recs[0], before) {
				t.Errorf("the record written before Redact changed")
			}
			last := strings.SplitAfter(readFile(t, path), "\n")[1]
			for _, h := range tc.hidden {
				if strings.Contains(last, h) {
					t.Errorf("the line written after Redact contains %q: %s", h, last)
				}
			}
		})
	}
}

func TestRedactAccumulates(t *testing.T) {
	path := newPath(t)
	j := mustCreate(t, path)
	j.Redact("first-secret")
	j.Redact("second-secret", "first-secret")
	rec := mustAppend(t, j, Output, "", []string{"first-secret", "second-secret", "third-secret"})
	got, err := Decode[[]string](rec)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"[redacted]", "[redacted]", "third-secret"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("data = %q, want %q", got, want)
	}
}
