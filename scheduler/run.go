package scheduler

// The plugin's arguments beyond the seed's: where predictions go
// (output_measurement, target_database) and, for any trigger, a fixed
// window (start_time, end_time) and dry_run.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/regressd/regressd/schemas"
)

// MaxRetries is the largest max_retries: attempts per gateway call and per
// write, end to end across the pipeline's redeliveries.
const MaxRetries = schemas.MaxRetriesLimit

// Run is what arguments ask of a run: the job's arguments, and the window
// bounds and dry_run they fix (nil and false when they leave them open).
type Run struct {
	Args       schemas.RunArgs
	Start, End *time.Time
	DryRun     bool
}

// resolveRunArgs reads output_measurement, target_database, start_time,
// end_time and dry_run into run, adding their problems to errs.
func resolveRunArgs(args map[string]string, run *Run, errs []error) []error {
	if out := strings.TrimSpace(args["output_measurement"]); out != "" {
		if err := checkIdent("output_measurement", out); err != nil {
			errs = append(errs, err)
		}
		if out == run.Args.Measurement {
			errs = append(errs, fmt.Errorf("output_measurement must differ from measurement (%q): predictions would be written into the table read as ground truth", out))
		}
		run.Args.OutputMeasurement = out
	}
	if db := strings.TrimSpace(args["target_database"]); db != "" {
		// Our analogue of the plugin's database is a PostgreSQL schema of
		// the same database, created on the first write.
		if err := checkIdent("target_database", db); err != nil {
			errs = append(errs, err)
		}
		if strings.HasPrefix(strings.ToLower(db), "pg_") || strings.EqualFold(db, "information_schema") {
			errs = append(errs, fmt.Errorf("target_database %q names a PostgreSQL system schema: choose another schema for the output table", db))
		}
		run.Args.OutputSchema = db
	}
	for _, k := range []string{"start_time", "end_time"} {
		v := strings.TrimSpace(args[k])
		if v == "" {
			continue
		}
		t, err := ParseTime(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
			continue
		}
		if k == "start_time" {
			run.Start = &t
		} else {
			run.End = &t
		}
	}
	if run.Start != nil && run.End != nil && !run.Start.Before(*run.End) {
		errs = append(errs, fmt.Errorf("start_time %s is not before end_time %s", run.Start.Format(time.RFC3339), run.End.Format(time.RFC3339)))
	}
	if v, ok := args["dry_run"]; ok && strings.TrimSpace(v) != "" {
		d, err := parseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("dry_run: %w", err))
		}
		run.DryRun = d
	}
	return errs
}

// errBodyWithConfigFile refuses a request body sent to a trigger whose
// arguments come from a config file.
var errBodyWithConfigFile = errors.New(ArgConfigFile + " supplies every argument of this trigger, so the request body must be empty ({} or nothing)")
