package steps

import (
	"errors"

	"github.com/kremedy/kremedy/steps/ports"
)

// Errors the engine and the kinds return; each is wrapped with the step and
// the cause.
var (
	ErrCheckFailed = ports.ErrCheckFailed
	ErrRefused     = ports.ErrRefused
	ErrAborted     = errors.New("aborted by the operator")
	ErrStalePlan   = errors.New("the cluster changed after the plan was made")
	ErrNotApproved = errors.New("confirmation does not match")
	// ErrOutcomeUnknown: the action was sent but its result never came
	// back (a dropped SSH session); the adapters wrap it.
	ErrOutcomeUnknown = ports.ErrOutcomeUnknown
	// ErrNothingDone marks an error after which nothing was done on the
	// cluster (a refused start, a failed connection).
	ErrNothingDone = errors.New("nothing was done")
	// ErrRunExists: the run directory already holds a run.
	ErrRunExists = errors.New("the run directory already holds a run")
	// ErrNotARun: the directory holds no kremedy run.
	ErrNotARun = errors.New("not a kremedy run")
)
