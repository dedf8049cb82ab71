package steptest

import "testing"

func TestFakeZKConformance(t *testing.T) {
	z := NewZK(t, "/kafka")
	z.Put("/suite", "")
	CoordinatorConformance(t, z, "/suite")
}

func TestFakeZKStateConformance(t *testing.T) {
	StateConformance(t, NewZK(t, "/kafka"))
}
