// Package steps is the runbook engine and its step kinds.
package steps
