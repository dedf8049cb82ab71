package steps

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"text/template"
)

// Runbook is a runbook bound to its parameters, ready to run: the steps
// the engine walks and everything the UI and the report need to know of it,
// so that neither names a runbook. The runbooks package builds it.
type Runbook struct {
	Name    string
	Summary string
	Steps   []Step
	// Confirm is what a destructive step's confirmation is: typing Word
	// (the topic of a topic runbook, the inventory's cluster name for a
	// cluster-wide one), which the UI calls "the <Noun> name".
	Confirm Confirmation
	// Artifacts are the files its steps write in the run directory.
	Artifacts []Artifact
	// Next is what to do after a successful run: text/templates, filled
	// like rollback notes.
	Next []string
	// Params are the bound parameters, as text. The run-start record keeps
	// them: a resume binds the runbook again from them.
	Params map[string]string
}

// Confirmation is a runbook's typed confirmation.
type Confirmation struct {
	Word string // what the operator types
	Noun string // what it is: "topic", "cluster"
}

// Subject says what a run acts on, for a header or a report line: the
// cluster, and the confirmation word when it is not the cluster's name
// (`topic "orders" on cluster lab`, or `cluster lab`).
func (c Confirmation) Subject(cluster string) string {
	if c.Noun == "cluster" && c.Word == cluster || c.Word == "" {
		return "cluster " + cluster
	}
	return fmt.Sprintf("%s %q on cluster %s", c.Noun, c.Word, cluster)
}

// Artifact is a file a run writes: a backup, a manifest, saved state.
type Artifact struct {
	ID   string // how rollback notes and kinds name it: {{.backup}}
	What string // for humans: "znode backup (data, ACLs, versions)"
	Path string // relative to the run directory in a Runbook; absolute from a Session
}

// Infos lists the steps' descriptions.
func (rb *Runbook) Infos() []Info {
	out := make([]Info, len(rb.Steps))
	for i, s := range rb.Steps {
		out[i] = s.Info
	}
	return out
}

// TemplateData is what a rollback note or a next-step text of rb may use:
// every parameter by name, every artifact by id (its path in runDir), and
// run_dir, report, inventory and cluster.
func (rb *Runbook) TemplateData(runDir, inventory, cluster string) map[string]string {
	d := maps.Clone(rb.Params)
	if d == nil {
		d = map[string]string{}
	}
	for _, a := range rb.Artifacts {
		d[a.ID] = filepath.Join(runDir, a.Path)
	}
	d["run_dir"], d["report"], d["inventory"], d["cluster"] = runDir, filepath.Join(runDir, ReportFile), inventory, cluster
	return d
}

// Render fills one of a runbook's templates; missing keys are errors.
func Render(tmpl string, data map[string]string) (string, error) {
	if strings.TrimSpace(tmpl) == "" {
		return "", nil
	}
	t, err := template.New("note").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", err
	}
	return strings.TrimSpace(b.String()), nil
}
