package lab

import (
	"os"
	"strings"
	"testing"
)

// TestLogDirSizeRefusals: --log-dir-size takes a size such as 64m, and
// only root may mount the tmpfs it asks for; a plain directory is not a
// mount point, / is.
func TestLogDirSizeRefusals(t *testing.T) {
	c := DefaultConfig()
	c.LogDirSize = "64 MB"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "a size such as 64m") {
		t.Fatalf("--log-dir-size 64 MB: %v", err)
	}
	c.LogDirSize = "64m"
	err := c.checkLogDirSize()
	if root := os.Geteuid() == 0; root != (err == nil) || !root && !strings.Contains(err.Error(), "needs root") {
		t.Fatalf("--log-dir-size 64m as uid %d: %v", os.Geteuid(), err)
	}
	if Mounted(t.TempDir()) || !Mounted("/") {
		t.Fatal("Mounted: a fresh directory is not a mount point, / is")
	}
}
