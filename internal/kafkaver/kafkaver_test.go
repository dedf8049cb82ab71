package kafkaver

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]Version{
		"2.8.2":   {2, 8, 2, ""},
		"2.7":     {2, 7, -1, ""},
		"2.7-IV2": {2, 7, -1, "IV2"},
		"3.9-IV0": {3, 9, -1, "IV0"},
		"0.10.2":  {0, 10, 2, ""},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("String() = %q, want %q", got.String(), in)
		}
	}
	for _, bad := range []string{"", "3", "a.b", "3.9.2.1", "-1.2", "3.x"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestBehaviour(t *testing.T) {
	for _, c := range []struct {
		sw, ibp       string
		ids, refuses  bool
		runnableError bool
	}{
		{"2.4.1", "", false, false, false},
		{"2.7.2", "", false, false, false},
		{"2.8.2", "", true, false, false},
		{"2.8.2", "2.7", false, false, false},
		{"3.4.1", "", true, true, false},
		{"3.9.2", "", true, true, false},
		{"3.9.2", "2.7-IV2", false, false, false},
		{"3.9.2", "2.8-IV1", true, true, false},
		{"2.3.1", "", false, false, true},
		{"4.0.0", "", true, true, true},
	} {
		sw := MustParse(c.sw)
		var ibp Version
		if c.ibp != "" {
			ibp = MustParse(c.ibp)
		}
		if got := TopicIDs(sw, ibp); got != c.ids {
			t.Errorf("TopicIDs(%s, %q) = %v", c.sw, c.ibp, got)
		}
		if got := RefusesStaleLog(sw, ibp); got != c.refuses {
			t.Errorf("RefusesStaleLog(%s, %q) = %v", c.sw, c.ibp, got)
		}
		if err := sw.Runnable(); (err != nil) != c.runnableError {
			t.Errorf("Runnable(%s) = %v", c.sw, err)
		}
	}
}

func TestKeepsDeletionQueued(t *testing.T) {
	for v, want := range map[string]bool{"2.4.1": true, "2.6.3": true, "2.7.2": false, "3.9.2": false} {
		if got := KeepsDeletionQueued(MustParse(v)); got != want {
			t.Errorf("KeepsDeletionQueued(%s) = %v", v, got)
		}
	}
}
