package inventory

import "testing"

// groupCases: policy.group, the approvers' Unix group a run shares its
// directory with (review M4), is a group name, never a number or a path.
var groupCases = []parseCase{
	{name: "policy.group", in: minimal + "policy:\n  approvals: 2\n  allowed_signers: f\n  group: kremedy-approvers\n"},
	{name: "policy.group is a number", in: minimal + "policy:\n  approvals: 2\n  allowed_signers: f\n  group: \"1003\"\n",
		want: []string{`t.yaml:16:10: policy.group "1003" is not a Unix group name`}},
	{name: "policy.group is a path", in: minimal + "policy:\n  approvals: 2\n  allowed_signers: f\n  group: /etc/group\n",
		want: []string{`t.yaml:16:10: policy.group "/etc/group" is not a Unix group name`}},
	{name: "policy.group empty", in: minimal + "policy:\n  approvals: 2\n  allowed_signers: f\n  group: \"\"\n",
		want: []string{`t.yaml:16:10: policy.group "" is not a Unix group name`}},
}

func init() { parseCases = append(parseCases, groupCases...) }

// TestPolicyGroupRoundTrip: policy.group is read and written back.
func TestPolicyGroupRoundTrip(t *testing.T) {
	inv, err := Parse("t.yaml", []byte(groupCases[0].in))
	if err != nil || inv.Policy == nil || inv.Policy.Group != "kremedy-approvers" {
		t.Fatalf("parsed %+v, %v", inv, err)
	}
	out, err := inv.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("t.yaml", out)
	if err != nil || again.Policy.Group != "kremedy-approvers" {
		t.Fatalf("written back:\n%s\nread: %+v, %v", out, again, err)
	}
}
